/**
 * How long past SHUTDOWN_GRACE_MS closing may take (queues, Redis) before the process exits
 * anyway (exit 1). SHUTDOWN_GRACE_MS plus this must stay below the orchestrator's kill
 * deadline (docker-compose stop_grace_period).
 */
export const SHUTDOWN_BACKSTOP_MS = 5000;

/**
 * Wait for `work` at most `ms`: true when it settled in time, false when the grace ran out
 * (the work keeps running; the caller decides what to cut off). Never rejects.
 */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
