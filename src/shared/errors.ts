/**
 * Job errors whose type says what the queue should do with the job (BullMQ habit).
 */

/** Another live turn holds the chat's lease: try again after `ttlMs`. */
export class LeaseBusyError extends Error {
  override name = 'LeaseBusyError';
  constructor(readonly ttlMs: number) {
    super(`chat lease busy for another ${ttlMs}ms`);
  }
}

/**
 * The worker is shutting down and its grace ran out: the turn was stopped before its commit,
 * its lease released. Retry the job (elsewhere); nothing of the attempt was committed.
 */
export class TurnAbortedError extends Error {
  override name = 'TurnAbortedError';
}

/** This turn's fence is stale: a newer turn owns the chat. Never retry this attempt. */
export class FencedOutError extends Error {
  override name = 'FencedOutError';
  constructor(readonly op: string) {
    super(`fenced out during ${op}: a newer turn owns this chat`);
  }
}
