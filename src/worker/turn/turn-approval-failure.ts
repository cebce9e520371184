import type { Logger } from '../../shared/logger.js';
import { readOnce } from '../../shared/store/once.js';
import type { UsageTally } from '../../shared/usage.js';
import { approvalCommit } from '../agent/approval/commit.js';
import type { ApprovalDeps } from '../agent/approval/deps.js';
import { approvalOnceKey, knownOutcome } from '../agent/approval/guard.js';
import type { TurnApprovals } from '../agent/approval/plan.js';
import { classifyTurnError, errorDetail } from '../agent/failure.js';
import type { ResumedCall } from '../agent/loop.js';
import type { Lane } from './lane.js';
import type { CommitDeps } from './turn-commit.js';
import type { FailedTurn } from './turn-failure.js';

/**
 * A resumed turn (an approval answer applied) that fails on its job's last attempt for a
 * reason that is not the model's nor Redis's (docs/approvals.md, "Crashes"). Its answers are
 * not a person's messages, so no batch fails and no notice is sent; instead the requests are
 * settled as far as they got, so the chat is never held behind them: an approved call that ran
 * (its once record) shows its outcome, one that did not shows why, a denial is recorded. One
 * fenced commit, as a turn's. Undefined when this failure is not one to settle so (the job
 * retries, or the model's failure makes it wait).
 */
export async function settleResumeFailure(
  deps: CommitDeps & { approvals?: ApprovalDeps },
  lane: Lane,
  logger: Logger,
  run: { approvals?: TurnApprovals | undefined; usage: UsageTally; finalAttempt: boolean },
  err: unknown,
): Promise<FailedTurn | undefined> {
  const { approvals } = run;
  if (approvals?.kind !== 'resume' || !deps.approvals || !run.finalAttempt) return undefined;
  const failure = classifyTurnError(err);
  if (failure.kind === 'model' || (failure.kind === 'transient' && failure.infrastructure)) return undefined;
  const { store } = deps;
  const { chatKey, runId, fence } = lane;
  const detail = errorDetail(err);
  const waiting = approvals.settle.filter((s) => s.approved && !s.final);
  const once = await readOnce(
    store,
    chatKey,
    waiting.map((s) => approvalOnceKey(s.request.id)),
  );
  const resumed: ResumedCall[] = waiting.map((s) => {
    const known = knownOutcome(once.get(approvalOnceKey(s.request.id)));
    const toolCallId = s.request.toolCallId;
    if (known?.kind === 'result') return { toolCallId, kind: 'result', output: known.output };
    return { toolCallId, kind: 'error', error: known?.error ?? `The approved call did not run: ${detail}` };
  });
  const settled = await approvalCommit({
    approvals,
    chatKey,
    runId,
    now: Date.now(),
    ttlMs: deps.approvals.ttlMs,
    messages: [],
    resumed,
    people: [],
    maxCharsPerMessage: deps.settings.maxCharsPerMessage,
    outboxKeep: store.retention.outboxKeep,
  });
  const code = failure.kind === 'message' ? failure.code : 'TURN_FAILED';
  const committed = await store.commit(chatKey, fence, {
    runId,
    consumed: approvals.answers.map((e) => e.streamId),
    messages: settled.messages,
    releaseAs: lane.owner,
    ...(settled.plan && { approvals: settled.plan }),
    usage: run.usage.take(),
    event: {
      worker: deps.workerId,
      steps: 0,
      models: [],
      merged: 0,
      messageIds: [],
      sent: 0,
      inputMessages: 0,
      ms: 0,
      failed: code,
      error: detail,
    },
  });
  if (!committed.ok) {
    lane.markLost(`approval settle ${committed.reason}`);
    return { status: 'lost', runId };
  }
  if (committed.released) lane.committedAndReleased(committed.pending);
  for (const s of settled.settled)
    deps.approvals.metrics?.toolApprovals.inc({ tool: s.request.tool, outcome: s.outcome });
  logger.warn({ code, error: detail }, 'a resumed turn failed for good; its approval requests are settled');
  return { status: 'failed', runId, code, failed: 0, pending: committed.pending };
}
