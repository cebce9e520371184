import { ModelUnavailableError, TurnAbortedError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { UsageTally } from '../../shared/usage.js';

/** What a turn's one summary line reads of the turn. */
export interface TurnTally {
  logger: Logger;
  /** When the turn began (Date.now(), before its lease). */
  started: number;
  /** The pending messages the turn started from. */
  batch: readonly unknown[];
  /** Messages merged into it mid-turn (every attempt). */
  merged: number;
  /** Its model calls (every attempt): steps and tokens. */
  usage: UsageTally;
  /** Replies it sent with chat_send (or the fallback). */
  sent: { sent: readonly unknown[] };
}

/** What a turn ended with, as the line names it. */
function outcomeOf(result: { status: string } | undefined, err: unknown): string {
  if (result) return result.status;
  if (err instanceof TurnAbortedError) return 'aborted';
  if (err instanceof ModelUnavailableError) return 'model_unavailable';
  return 'retry';
}

/**
 * The turn's one `info` line (docs/operations.md, "Logs"): how it ended, what it took in and
 * sent, its steps, tokens and time. Written inside the turn's span, so with tracing on it
 * carries the trace_id; the logger's bindings carry chatKey, runId and jobId. A turn that
 * found nothing pending (`idle`) did nothing and writes nothing. Must not throw.
 */
export function logTurnEnd(turn: TurnTally, result: { status: string } | undefined, err?: unknown): void {
  if (result?.status === 'idle') return;
  const { calls, inputTokens, cachedInputTokens, outputTokens } = turn.usage.total;
  const outcome = outcomeOf(result, err);
  turn.logger.info(
    {
      outcome,
      messages: turn.batch.length + turn.merged,
      merged: turn.merged,
      steps: calls,
      sent: turn.sent.sent.length,
      inputTokens,
      outputTokens,
      cachedShare: inputTokens > 0 ? Math.round((cachedInputTokens / inputTokens) * 1000) / 1000 : 0,
      ms: Date.now() - turn.started,
      ...(result && 'code' in result && { code: result.code }),
      ...(outcome === 'retry' && { error: (err as Error)?.message ?? String(err) }),
    },
    'turn ended',
  );
}
