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

/** This turn's fence is stale: a newer turn owns the chat. Never retry this attempt. */
export class FencedOutError extends Error {
  override name = 'FencedOutError';
  constructor(readonly op: string) {
    super(`fenced out during ${op}: a newer turn owns this chat`);
  }
}
