import type { UIMessage } from 'ai';
import type { Logger } from '../../shared/logger.js';
import { assistantMessageId, type ChatMessage } from '../../shared/messages.js';
import { ReplicationTimeoutError } from '../../shared/replica-acks.js';
import type { ChatStore, InboxEntry } from '../../shared/store/chat-store.js';
import type { ReplyTail } from '../../shared/store/reply-streams.js';
import { withTokens } from '../../shared/tokens.js';
import type { UsageTally } from '../../shared/usage.js';
import { type ApprovalCommit, approvalCommit } from '../agent/approval/commit.js';
import type { ApprovalDeps } from '../agent/approval/deps.js';
import type { TurnApprovals } from '../agent/approval/plan.js';
import type { TurnMessages } from '../agent/earlier-sends.js';
import { interleave } from '../agent/interleave.js';
import type { LoopResult } from '../agent/loop.js';
import { send } from '../agent/tools/chat-send.js';
import { type DeliveryTrigger, triggerDelivery } from '../agent/tools/outbox.js';
import type { ToolTurn } from '../agent/tools/tool-turn.js';
import type { Lane } from './lane.js';
import type { ReplyWriter } from './stream/reply-writer.js';

/** What committing a turn needs of the turn's dependencies. */
export interface CommitDeps {
  store: ChatStore;
  settings: { maxCharsPerMessage: number };
  workerId: string;
  /** Tool approval: the commit settles and opens requests (approval/commit.ts). */
  approvals?: ApprovalDeps;
  /** Triggers a chat's delivery (an approval card in its outbox). */
  deliver?: DeliveryTrigger;
  /**
   * After a commit, with the history's token total and the token budget this turn had for
   * messages (after the system prompt): the compaction trigger. Must not throw.
   */
  afterCommit?: (chatKey: string, historyTokens: number, messageBudget: number) => Promise<void>;
}

/** The turn, as its commit sees it. */
export interface CommitRun {
  deps: CommitDeps;
  lane: Lane;
  logger: Logger;
  /** The turn's model calls not yet written: the commit takes them (counted once, fenced). */
  usage?: UsageTally;
  /** The live view of the reply: the commit writes its last entries and closes it. */
  reply?: Pick<ReplyWriter, 'closing' | 'committed'> | undefined;
  /**
   * The turn did not stream: its whole reply (the loop's response, answering these message
   * ids), which the commit writes only if a reader came while it ran (commit.lua).
   */
  lateReply?: ((response: UIMessage, messageIds: string[]) => ReplyTail) | undefined;
}

export type CommittedTurn =
  | { status: 'lost'; runId: string }
  | {
      status: 'done';
      runId: string;
      pending: number;
      consumed: number;
      merged: number;
      sent: number;
    };

/** What of the attempt's input its commit reads. */
export interface AttemptInput {
  /** When the attempt started reading. */
  started: number;
  /** The pending messages the attempt started from: their entries are consumed. */
  pending: InboxEntry[];
  /** What the turn answers (the pending messages with an earlier run's replies in place). */
  turn: TurnMessages;
  /** The tools' state for the turn: its sends are counted, the fallback reply is sent through it. */
  toolTurnState: ToolTurn;
  /** Messages in the model's input. */
  inputMessages: number;
  /** The token budget the attempt had for messages. */
  budget: number;
  /** What the turn settles and resumes of tool approvals (approval/plan.ts), if anything. */
  approvals?: TurnApprovals | undefined;
  /** The people's messages the turn answered (merges included): whom its new requests are for. */
  answered?: readonly ChatMessage[];
}

/** After the tool loop: the fallback reply, then the fenced commit of the turn's messages. */
export async function commitTurn(
  run: CommitRun,
  loop: LoopResult<InboxEntry>,
  input: AttemptInput,
): Promise<CommittedTurn> {
  const { deps, lane, logger } = run;
  const { store, settings } = deps;
  const { chatKey, runId, fence } = lane;
  const { started, pending, turn, toolTurnState, budget } = input;
  const sendState = toolTurnState.sends;

  // The model answered in text only: deliver that text rather than stay silent. Not when an
  // earlier run's replies already answered everything: the text is a remark after them.
  const answered = turn.answeredAll && loop.merges.length === 0;
  if (sendState.sent.length === 0 && !answered && loop.finalText.trim()) {
    await send(toolTurnState, loop.finalText.trim());
  }
  if (lane.lost) return { status: 'lost', runId };

  const now = Date.now();
  const toCommit: ChatMessage[] = [...turn.messages];
  const consumed = pending.map((e) => e.streamId);
  const messageIds = pending.map((e) => e.message.id);
  let segment = 0;
  for (const seg of interleave(loop.response.parts, loop.merges)) {
    if (seg.kind === 'user') {
      toCommit.push(...seg.items.map((e) => e.message));
      consumed.push(...seg.items.map((e) => e.streamId));
      messageIds.push(...seg.items.map((e) => e.message.id));
    } else {
      toCommit.push(
        await withTokens(
          {
            id: assistantMessageId(runId, segment++),
            role: 'assistant',
            parts: seg.parts,
            metadata: { ts: now, chatKey, runId, kind: 'normal' },
          },
          settings.maxCharsPerMessage,
        ),
      );
    }
  }

  // Tool approval: settled calls made final in history, new requests opened with a card each.
  // The consumed answers go with them; a request's expiry is asked for before it exists.
  consumed.push(...(input.approvals?.answers.map((e) => e.streamId) ?? []));
  const approval = deps.approvals
    ? await approvalCommit({
        approvals: input.approvals,
        chatKey,
        runId,
        now,
        ttlMs: deps.approvals.ttlMs,
        messages: toCommit,
        resumed: loop.resumed,
        people: [...new Set((input.answered ?? []).flatMap((m) => m.metadata.userId ?? []))],
        maxCharsPerMessage: settings.maxCharsPerMessage,
        outboxKeep: store.retention.outboxKeep,
      })
    : undefined;
  const appended = approval?.messages ?? toCommit;
  for (const r of approval?.opened ?? []) await deps.approvals?.expire?.(chatKey, r.id, r.expiresAt);

  // REDIS_REPLICA_ACKS: a reconnect since the lease (a failover) may have taken this turn's
  // unconfirmed writes — a chat_send's item among them — with the old primary. Committed on
  // the new one, the turn would record an answer the person never gets. The job retries
  // instead: its next run finds the sends that survived in `uncommitted` and answers the rest.
  store.assertSameConnection(chatKey, lane.acquiredOn);
  const merged = loop.merges.reduce((n, m) => n + m.items.length, 0);
  // One event per turn, written atomically with the commit, and the lease released by the
  // same script: one round trip for all three.
  lane.endRenewals();
  // The reply's `finish` goes with the commit: a client reads it exactly when the turn is in
  // history, and the turn saves a round trip.
  const reply = run.reply
    ? await run.reply.closing([{ type: 'finish' }])
    : run.lateReply?.(loop.response, [
        ...new Set([...messageIds, ...(input.approvals?.answers.map((e) => e.message.id) ?? [])]),
      ]);
  const mark = store.markWrite(chatKey);
  let committed: Awaited<ReturnType<ChatStore['commit']>>;
  try {
    committed = await store.commit(chatKey, fence, {
      runId,
      consumed,
      messages: appended,
      releaseAs: lane.owner,
      ...(approval?.plan && { approvals: approval.plan }),
      ...(reply && { reply }),
      ...(run.usage && { usage: run.usage.take() }),
      event: {
        worker: deps.workerId,
        steps: loop.steps,
        models: loop.models,
        merged,
        // Which messages this turn answered, by id: a reader that saw a commit a failover
        // then lost, and the turn that answered the same messages again, counts them once.
        messageIds,
        sent: sendState.sent.length,
        ...(lane.uncommitted.length > 0 && { earlierSends: lane.uncommitted.length }),
        inputMessages: input.inputMessages,
        inputTokens: loop.usage.inputTokens,
        outputTokens: loop.usage.outputTokens,
        ms: Date.now() - started,
      },
    });
  } catch (err) {
    run.reply?.committed(false);
    throw err;
  }
  run.reply?.committed(committed.ok);
  if (!committed.ok && committed.reason === 'missing-send') {
    // A send of this run is gone from the server the commit ran on (a failover): the job
    // retries, and its next run answers what that send answered.
    logger.warn(
      { found: committed.detail, sent: sendState.sent.length },
      'a send of this turn is missing; retrying',
    );
    throw new ReplicationTimeoutError(0, 0, 0, 'reconnected');
  }
  if (!committed.ok) {
    lane.markLost(`commit ${committed.reason}`);
    if (committed.reason === 'missing') {
      logger.error({ detail: committed.detail }, 'inbox entry already consumed; turn discarded');
    }
    return { status: 'lost', runId };
  }
  if (committed.released) lane.committedAndReleased(committed.pending);
  if (approval) approvalsCommitted(run, approval, committed.cards);
  // REDIS_REPLICA_ACKS: the turn is done (its job completes, compaction may follow) only once
  // the replicas have the commit. Unconfirmed, this throws a ReplicationTimeoutError (as a
  // Redis failure would): the job retries and finds the messages consumed, or — if a
  // failover lost the commit — answers them (its sends are known: they were confirmed).
  await store.confirmWrite(mark);
  await deps
    .afterCommit?.(chatKey, committed.tokens, budget)
    .catch((err: unknown) => logger.warn({ err }, 'afterCommit failed'));
  return {
    status: 'done',
    runId,
    pending: 0,
    consumed: consumed.length,
    merged,
    sent: sendState.sent.length,
  };
}

/** After the commit: the cards delivered, the settled requests counted. Must not throw. */
function approvalsCommitted(run: CommitRun, approval: ApprovalCommit, cards: number): void {
  const { deps, lane, logger } = run;
  if (cards > 0 && lane.route)
    void triggerDelivery({ deliver: deps.deliver, logger, store: deps.store }, lane.chatKey, {
      runId: lane.runId,
    });
  for (const s of approval.settled)
    deps.approvals?.metrics?.toolApprovals.inc({ tool: s.request.tool, outcome: s.outcome });
  if (approval.opened.length > 0)
    logger.info({ approvals: approval.opened.map((r) => r.id) }, 'tool calls wait for approval');
}
