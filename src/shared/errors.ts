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

/**
 * Why a message itself could not be processed (docs/agent.md "When a message fails"): stored on the
 * message as `metadata.failure.code` and in its `turn.failed` event. Stable API, like the
 * HTTP codes.
 * - CONTEXT_OVERFLOW: the provider refused the turn as too long again after compaction;
 * - CONTENT_REJECTED: the provider refused the request's content (400, 413, 415, 422);
 * - FILE_REFUSED: a file part could not be fetched safely (private address, too large, ...);
 * - INVALID_MESSAGE: the stored message cannot be turned into a model prompt;
 * - TURN_FAILED: the turn failed on these messages through all its job attempts.
 */
export const MESSAGE_FAILURE_CODES = [
  'CONTEXT_OVERFLOW',
  'CONTENT_REJECTED',
  'FILE_REFUSED',
  'INVALID_MESSAGE',
  'TURN_FAILED',
] as const;
export type MessageFailureCode = (typeof MESSAGE_FAILURE_CODES)[number];

/**
 * The model endpoint cannot be used right now (credentials refused, unreachable, overloaded):
 * nothing is wrong with the chat's messages. They stay pending and the turn job is delayed,
 * never counted as a failed attempt (docs/agent.md "When a message fails").
 */
export class ModelUnavailableError extends Error {
  override name = 'ModelUnavailableError';
  constructor(
    readonly kind: string,
    options: { cause?: unknown },
  ) {
    super(
      `model unavailable (${kind}): ${(options.cause as Error)?.message ?? String(options.cause)}`,
      options,
    );
  }
}

/** A file part's URL was not fetched: unsafe address, too large, too slow, or not there. */
export class FileRefusedError extends Error {
  override name = 'FileRefusedError';
}
