import type { Queue } from './bullmq.js';
import type { Logger } from './logger.js';

/**
 * A Queue whose connection BullMQ has set up. BullMQ sets a Queue's connection up once, when
 * the Queue is built (it asks Redis for its version), and keeps the outcome: if that one
 * command fails — on an ingress connection, which times commands out, during a stall of a
 * second — every later `add` fails with the same error while Redis answers everything else.
 * An ingress started then stored each message and answered 503 for it, and enqueued no turn,
 * until it was restarted. So the queue is built, awaited, and on failure closed (a shared
 * connection stays open) and built again, with backoff, until `timeoutMs` has passed; then the
 * error is thrown, and the process fails its start instead of serving half.
 */
export async function readyQueue<Q extends Queue>(
  build: () => Q,
  opts: { timeoutMs: number; logger?: Logger },
): Promise<Q> {
  const deadline = Date.now() + opts.timeoutMs;
  for (let attempt = 1; ; attempt++) {
    const queue = build();
    // Its setup failure is awaited below; as an event it is noise.
    const ignore = () => undefined;
    queue.on('error', ignore);
    try {
      await queue.waitUntilReady();
      queue.off('error', ignore);
      return queue;
    } catch (err) {
      await queue.close().catch(() => undefined);
      const message = err instanceof Error ? err.message : String(err);
      if (Date.now() >= deadline) {
        throw new Error(`queue ${queue.name}: BullMQ could not set up its connection (${message})`, {
          cause: err,
        });
      }
      opts.logger?.warn(
        { queue: queue.name, attempt, err: message },
        'queue setup failed; building it again',
      );
      await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2000)));
    }
  }
}
