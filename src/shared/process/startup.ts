/**
 * Startup order shared by every process that takes jobs (worker, compactor, `all`):
 *
 *   1. checks      everything the configuration can get wrong (model, prompt file, ...),
 *                  before any I/O
 *   2. connections Redis, queues, BullMQ workers built with `autorun: false`, fleet-wide
 *                  settings applied; anything else a job needs (e.g. tool servers) goes here
 *   3. listeners   every port bound (the side server): a taken METRICS_PORT stops the
 *                  process here
 *   4. run         only now do the BullMQ workers start; the first job is taken after this
 *
 * A process that stops in steps 1–3 has taken no job. `Opened` collects what steps 2–3
 * opened so a failing step closes it again (the in-process callers — tests, the demo — must
 * not leak a connection or a half-started worker).
 */
export class Opened {
  private readonly closers: Array<() => Promise<unknown>> = [];

  /** Register how to close what was just opened. */
  add(close: () => Promise<unknown>): void {
    this.closers.push(close);
  }

  /** Close everything, newest first; every step runs even if an earlier one fails. */
  async closeAll(): Promise<void> {
    for (const close of this.closers.splice(0).reverse()) {
      await close().catch(() => undefined);
    }
  }

  /** Run a startup step; if it throws, close everything opened so far and rethrow. */
  async step<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      await this.closeAll();
      throw err;
    }
  }
}

/** A role that has passed steps 1–3: connected and bound, taking no job until `run()`. */
export interface Prepared<H> {
  /** Step 4: start taking jobs. */
  run(): Promise<H>;
  /** Close without having run (a later startup step of the process failed). Idempotent. */
  close(): Promise<void>;
}

/** Step 4 for a single role; if it fails, what steps 2–3 opened is closed again. */
export async function runPrepared<H>(prepared: Prepared<H>): Promise<H> {
  try {
    return await prepared.run();
  } catch (err) {
    await prepared.close();
    throw err;
  }
}
