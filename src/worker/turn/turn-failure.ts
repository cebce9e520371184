import { type MessageFailureCode, ModelUnavailableError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import type { ChatStore, InboxEntry } from '../../shared/store/chat-store.js';
import { failBatch, markFailed } from '../../shared/store/failures.js';
import { withTokens } from '../../shared/tokens.js';
import type { UsageTally } from '../../shared/usage.js';
import { classifyTurnError, errorDetail } from '../agent/failure.js';
import type { ModelHealth } from '../agent/model-health.js';
import { type DeliveryTrigger, triggerDelivery } from '../agent/tools/outbox.js';
import type { Lane } from './lane.js';

/** docs/agent.md "When a message fails": FAILURE_NOTICE's default. */
export const DEFAULT_FAILURE_NOTICE = "Sorry — I couldn't process your last message. Please send it again.";

/** What settling a failed turn needs of the turn's dependencies. */
export interface FailureDeps {
  store: ChatStore;
  settings: { maxCharsPerMessage: number };
  workerId: string;
  deliver?: DeliveryTrigger;
  /** FAILURE_NOTICE: what a person is told when their message cannot be processed. */
  failureNotice?: string;
  /** Model errors by kind and the endpoint's state for /readyz. */
  modelHealth?: ModelHealth;
  /** chatlane_messages_failed_total. */
  metrics?: Pick<Metrics, 'failedMessages'>;
}

export type FailedTurn =
  | { status: 'failed'; runId: string; code: MessageFailureCode; failed: number; pending: number }
  | { status: 'lost'; runId: string };

/**
 * A turn threw (its lane neither stopped nor lost). By what the error says about the batch
 * (failure.ts): the model's → ModelUnavailableError (the job waits, nobody is told); the
 * message's, or anything but Redis on the job's last attempt → the batch fails (one notice);
 * otherwise the error is rethrown and the job retries.
 */
export async function settleFailedTurn(
  deps: FailureDeps,
  lane: Lane,
  logger: Logger,
  turn: { batch: InboxEntry[]; usage?: UsageTally },
  err: unknown,
  finalAttempt: boolean,
): Promise<FailedTurn> {
  const { batch } = turn;
  const { chatKey, runId } = lane;
  const failure = classifyTurnError(err);
  const error = errorDetail(err);
  if (failure.kind === 'model') {
    // Nobody is told and nothing is dropped: the messages wait for the model to come back.
    deps.modelHealth?.failed(failure.errorKind, error);
    await deps.store
      .appendEvent(chatKey, 'turn.failed', {
        runId,
        error,
        reason: 'model_unavailable',
        kind: failure.errorKind,
      })
      .catch(() => undefined);
    throw new ModelUnavailableError(failure.errorKind, { cause: err });
  }
  const code =
    failure.kind === 'message'
      ? failure.code
      : finalAttempt && !failure.infrastructure
        ? 'TURN_FAILED'
        : undefined;
  if (code && batch.length > 0) return failTurn(deps, lane, logger, turn, code, error);
  await deps.store
    .appendEvent(chatKey, 'turn.failed', { runId, error, reason: 'retry' })
    .catch(() => undefined);
  throw err;
}

/**
 * The batch cannot be processed: one notice, the messages into history marked failed,
 * `turn.failed` with the code — one fenced script, so a crash leaves either all of it or
 * none (the retry then fails the batch again and writes the notice once).
 */
async function failTurn(
  deps: FailureDeps,
  lane: Lane,
  logger: Logger,
  turn: { batch: InboxEntry[]; usage?: UsageTally },
  code: MessageFailureCode,
  error: string,
): Promise<FailedTurn> {
  const { chatKey, runId, fence } = lane;
  const { batch } = turn;
  const messages = await Promise.all(
    batch.map((e) => withTokens(markFailed(e.message, code, error), deps.settings.maxCharsPerMessage)),
  );
  const mark = deps.store.markWrite(chatKey);
  const result = await failBatch(deps.store, chatKey, fence, {
    runId,
    consumed: batch.map((e) => e.streamId),
    messages,
    notice: deps.failureNotice ?? DEFAULT_FAILURE_NOTICE,
    ts: Date.now(),
    code,
    event: { worker: deps.workerId, error, messages: batch.map((e) => e.message.id) },
    ...(turn.usage && { usage: turn.usage.take() }),
  });
  if (!result.ok) {
    lane.markLost(`fail ${result.reason}`);
    return { status: 'lost', runId };
  }
  logger.warn({ code, error, messages: batch.length }, 'messages could not be processed; the chat was told');
  deps.metrics?.failedMessages.inc({ code }, batch.length);
  if (result.routed)
    await triggerDelivery({ deliver: deps.deliver, logger, store: deps.store }, chatKey, {}, mark);
  return { status: 'failed', runId, code, failed: batch.length, pending: 0 };
}
