import { randomUUID } from 'node:crypto';
import type { LanguageModel, Tool, ToolSet } from 'ai';
import type { Config } from '../../shared/config.js';
import { decodeRoute } from '../../shared/delivery/route.js';
import type { TypingIndicator } from '../../shared/delivery/typing.js';
import { TurnAbortedError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { assistantMessageId } from '../../shared/messages.js';
import { answerOf } from '../../shared/store/approvals.js';
import type { ChatStore, InboxEntry } from '../../shared/store/chat-store.js';
import type { ContactBook } from '../../shared/store/contacts.js';
import { DEFAULT_ONCE_LIMITS, type OnceLimits } from '../../shared/store/once.js';
import type { ReplyStreams } from '../../shared/store/reply-streams.js';
import { viewTokens, withTokens } from '../../shared/tokens.js';
import { addLinks, inSpan, inSpanSync, type Span } from '../../shared/tracing/spans.js';
import { UsageTally } from '../../shared/usage.js';
import type { ApprovalDeps } from '../agent/approval/deps.js';
import { guardApproved } from '../agent/approval/guard.js';
import { approvedCalls, planApprovals, type TurnApprovals } from '../agent/approval/plan.js';
import { withEarlierSends } from '../agent/earlier-sends.js';
import { type LoopControl, runLoop } from '../agent/loop.js';
import { createMergeRoom } from '../agent/merge-room.js';
import { isContextOverflowError } from '../agent/overflow.js';
import { StepInterrupt } from '../agent/step-interrupt.js';
import { UiChunker } from '../agent/stream/ui-chunks.js';
import { ChatTools } from '../agent/tools/chat-tools.js';
import type { CustomTools } from '../agent/tools/custom-tools.js';
import { createExecShellTool } from '../agent/tools/exec-shell.js';
import { type DeliveryTrigger, triggerDelivery } from '../agent/tools/outbox.js';
import { type ChatSendState, toolTurn } from '../agent/tools/tool-turn.js';
import { shouldReport } from '../pipeline/compressor.js';
import { cacheKeyOptions, contextBlockTokens } from '../pipeline/request-cache.js';
import { budgetLineTokens, isNearlyFull } from '../pipeline/sections.js';
import type { Assembler, Compressor, Provider } from '../pipeline/types.js';
import type { ExecShell } from '../shell/exec-shell.js';
import type { ChatWorkspace } from '../shell/workspace.js';
import { Lane } from './lane.js';
import { type LaneArrivals, watchForInterrupts } from './lane-policy.js';
import type { RunningTurns } from './running-turns.js';
import { ReplyWriter } from './stream/reply-writer.js';
import { settleResumeFailure } from './turn-approval-failure.js';
import { type BudgetDeps, type HeldTurn, holdIfOverBudget } from './turn-budget.js';
import { type CommitDeps, type CommitRun, type CommittedTurn, commitTurn } from './turn-commit.js';
import { type FailedTurn, type FailureDeps, settleFailedTurn } from './turn-failure.js';
import {
  countedPending,
  linkMerged,
  reachEarlierSends,
  runtimeContext,
  toolsContextOf,
} from './turn-input.js';
import { logTurnEnd, type TurnTally } from './turn-log.js';
import { wholeReplyFields } from './whole-reply.js';

export interface TurnSettings {
  leaseMs: number;
  maxSteps: number;
  maxMerges: number;
  maxInputTokens: number;
  maxSendsPerTurn: number;
  /** MAX_CHARS_PER_MESSAGE: token counts describe messages cut to this (see model-view.ts). */
  maxCharsPerMessage: number;
  /** Tokens kept free for tool definitions and framing the tokenizer does not see. */
  reserveTokens: number;
  /** Longest a single model step may take. */
  stepTimeoutMs?: number;
  /** MEMORY_MAX_TOKENS: the cap of chat_memory_update (default 1000). */
  memoryMaxTokens?: number;
  /** How long a chat_send's look at the inbox stands in for the next step's read (default 200 ms). */
  freshInboxMs?: number;
  /** ONCE_*: what a tool's `context.once` keeps per chat (defaults when absent). */
  once?: OnceLimits;
}

export interface TurnDeps extends FailureDeps, CommitDeps, BudgetDeps {
  store: ChatStore;
  provider: Provider;
  compressor: Compressor;
  assembler: Assembler;
  model: LanguageModel;
  settings: TurnSettings;
  workerId: string;
  logger: Logger;
  /** Compact the chat now; used once when the provider rejects a turn as too long. */
  compactNow?: (chatKey: string) => Promise<unknown>;
  /**
   * This process's running turns: when the worker's shutdown grace runs out they are stopped
   * (they release their lease and fail their attempt, so another worker retries at once
   * instead of waiting for the job lock and the lease to expire).
   */
  running?: RunningTurns;
  /** Triggers a chat's delivery after an outbox write (chats with a reply route only). */
  deliver?: DeliveryTrigger;
  /** Set with CONTACT_SEND=on: the model gets chat_contact_send. */
  contacts?: ContactBook;
  /** Operator tools (MCP_CONFIG): the servers connected right now, named `<server>__<tool>`. */
  mcp?: { tools(): ToolSet; toolTokens(): number };
  /** `skills_load` over SKILLS_DIR, built once at start (none without skills). */
  skillsTool?: Tool;
  /** The tools given in code (startChatlane's `tools`), wrapped once per process: offered to every turn. */
  customTools?: CustomTools;
  /** "Typing" on the chat's platform while the turn answers (chats with a route that can show it). */
  typing?: Pick<TypingIndicator, 'start' | 'stop'>;
  /** The safe file download for the model (FILE_FETCH_*); the AI SDK's own when absent. */
  download?: Parameters<typeof runLoop>[0]['download'];
  /**
   * Reply streams: a turn someone can watch streams its reply there as it is generated
   * (/v1/ui, platform drafts); an unstreamed one writes it whole with its commit, if a reader
   * came meanwhile. Absent: no live view.
   */
  replies?: ReplyStreams;
  /**
   * REPLY_STREAMING: `auto` (default) streams a turn when it can be watched (the chat's watch
   * key, or PLATFORM_STREAMING for its platform thread); `always` streams every turn; `never`
   * none (a /v1/ui reply then comes whole, at the commit).
   */
  replyStreaming?: ReplyStreaming;
  /** PLATFORM_STREAMING=on: a platform chat's delivery is triggered as each chat_send starts, and at the reply's end. */
  platformStreaming?: boolean;
  /** EXEC_SHELL=on or approve: the sandbox; each turn gets its chat's workspace and the model exec_shell. */
  shell?: ExecShell;
  /**
   * LANE_POLICY=interrupt on some channel: the process's watch for messages announced to a
   * running turn; each turn may then have its model call aborted and its step restarted.
   */
  arrivals?: LaneArrivals;
  /** Tool approval (docs/approvals.md): which calls wait for a person; absent, no turn settles a request. */
  approvals?: ApprovalDeps;
}

export interface TurnOptions {
  /**
   * The job's last attempt: a failure not classified as the message's or the model's fails
   * the batch (TURN_FAILED) instead of being thrown, so the chat moves on.
   */
  finalAttempt?: boolean;
  /** The queue job running this turn, named in the turn's log lines. */
  jobId?: string | undefined;
}

const DEFAULT_MEMORY_MAX_TOKENS = 1000;

// One tool set per process (per deps): built on a process's first turn, never per turn.
const chatTools = new WeakMap<TurnDeps, ChatTools>();

function chatToolsOf(deps: TurnDeps): ChatTools {
  let tools = chatTools.get(deps);
  if (!tools) {
    tools = new ChatTools({
      memoryMaxTokens: deps.settings.memoryMaxTokens ?? DEFAULT_MEMORY_MAX_TOKENS,
      contacts: deps.contacts,
      skillsTool: deps.skillsTool,
      custom: deps.customTools?.tools,
      ...(deps.shell && { execShellTool: createExecShellTool(deps.shell.toolSettings()) }),
    });
    chatTools.set(deps, tools);
  }
  return tools;
}

const FRESH_INBOX_MS = 200;

/** On the retry after a context overflow the hard budget shrinks too: our count was too generous. */
const OVERFLOW_BUDGET_SCALE = 0.7;

export type TurnOutcome =
  | { status: 'busy'; retryInMs: number }
  | { status: 'idle'; pending: number }
  | { status: 'lost'; runId: string }
  | FailedTurn
  | HeldTurn
  | CommittedTurn;

/**
 * One turn of one chat: lease + fence → Provider → Compressor → Assembler → tool loop →
 * fenced commit → release. Throws on model or Redis failure (the job retries); returns
 * `lost` when another turn took the chat (nothing of ours was written).
 */
export function runTurn(deps: TurnDeps, chatKey: string, opts: TurnOptions = {}): Promise<TurnOutcome> {
  const runId = randomUUID();
  // One span per turn; the messages it consumes are linked to it as the turn reads them.
  return inSpan(
    'chatlane.turn',
    { attributes: { 'chatlane.chat_key': chatKey, 'chatlane.run_id': runId } },
    (span) => {
      // Tracing off: the turn's own promise, no frame of ours around it.
      const turn = leasedTurn(deps, chatKey, runId, opts, span);
      if (!span) return turn;
      return turn.then((outcome) => {
        span.setAttribute('chatlane.turn.outcome', outcome.status);
        return outcome;
      });
    },
  );
}

async function leasedTurn(
  deps: TurnDeps,
  chatKey: string,
  runId: string,
  opts: TurnOptions,
  span: Span | undefined,
): Promise<TurnOutcome> {
  // One child logger per turn (at thousands of turns in flight each one is kept until the end).
  const logger = deps.logger.child(
    opts.jobId === undefined ? { chatKey, runId } : { jobId: opts.jobId, chatKey, runId },
  );
  const { store, settings } = deps;
  const started = Date.now();
  const acquired = await Lane.acquire(store, {
    chatKey,
    owner: `${deps.workerId}:${runId}`,
    runId,
    leaseMs: settings.leaseMs,
    logger,
    // RunningTurns renews every tracked lane's lease on one timer per process.
    renewedElsewhere: deps.running !== undefined,
    // The turn's first read comes back with the lease: one round trip for both.
    reads: deps.provider.reads,
  });
  if (!(acquired instanceof Lane)) return { status: 'busy', retryInMs: acquired.busyMs };
  const lane = acquired;

  const run: TurnRun = {
    deps,
    lane,
    logger,
    // One send state for the whole turn: a retry after an overflow never repeats a reply, nor
    // one a crashed earlier run of this chat already sent.
    sent: { sent: [], earlier: lane.uncommitted.map((s) => s.text) },
    // The pending messages the turn started from: the batch that fails if they cannot be processed.
    batch: [],
    merged: 0,
    started,
    usage: new UsageTally(),
    span,
    reply: streams(deps, lane)
      ? new ReplyWriter(
          deps.replies,
          chatKey,
          lane.fence,
          runId,
          logger,
          {
            stop: () => lane.requestStop(),
            fencedOut: () => lane.markLost('reply stream write rejected'),
            ...(streamsToPlatform(deps, lane.route) && {
              platform: () => void triggerDelivery(deps, chatKey, { runId }),
            }),
          },
          lane.openReply,
        )
      : undefined,
  };
  // EXEC_SHELL=on: nothing is made or read until the turn's first command.
  run.workspace = deps.shell?.workspace({
    store,
    chatKey,
    fence: lane.fence,
    runId,
    logger,
    fencedOut: (reason) => lane.markLost(reason),
  });
  deps.running?.track(lane);
  const finalAttempt = opts.finalAttempt ?? false;
  // No frame of ours waits on the first attempt (at thousands of turns in flight each would
  // hold its registers and await closures through every model call): the rest of the turn
  // starts once it has settled.
  const first = turnBody(run, 1);
  const settle = () =>
    settleTurn(run, first, finalAttempt).then(
      (outcome) => {
        logTurnEnd(run, outcome);
        return outcome;
      },
      (err: unknown) => {
        logTurnEnd(run, undefined, err);
        throw err;
      },
    );
  return first.then(settle, settle);
}

/** REPLY_STREAMING's values, as config.ts declares them. */
export type ReplyStreaming = Config['REPLY_STREAMING'];

/** Whether the turn streams its reply: only when someone can watch it (REPLY_STREAMING=auto). */
function streams(deps: TurnDeps, lane: Lane): deps is TurnDeps & { replies: ReplyStreams } {
  if (!deps.replies) return false;
  const policy = deps.replyStreaming ?? 'auto';
  if (policy !== 'auto') return policy === 'always';
  return lane.watched || streamsToPlatform(deps, lane.route);
}

/** Whether delivery streams this chat's replies: PLATFORM_STREAMING and a platform thread to post to. */
function streamsToPlatform(deps: TurnDeps, route: string | undefined): boolean {
  return deps.platformStreaming === true && deps.deliver !== undefined && !!decodeRoute(route)?.threadId;
}

/** A turn that holds its chat's lane. */
interface TurnRun extends TurnTally {
  deps: TurnDeps;
  lane: Lane;
  logger: Logger;
  sent: ChatSendState;
  batch: InboxEntry[];
  /** The model calls of every attempt not yet written: the script that settles the turn takes them. */
  usage: UsageTally;
  /** The turn's span (tracing on). */
  span: Span | undefined;
  /** The live view of the turn's reply (absent when the turn does not stream). */
  reply: ReplyWriter | undefined;
  /** Not streamed: the whole reply, which the commit writes if a reader came meanwhile. */
  lateReply?: CommitRun['lateReply'];
  /** The chat's exec_shell workspace (EXEC_SHELL=on), deleted from disk when the turn ends. */
  workspace?: ChatWorkspace | undefined;
  /** LANE_POLICY=interrupt: the turn's interrupt (its count spans the overflow retry). */
  interrupt?: StepInterrupt | undefined;
  /** What the attempt settles of tool approvals (approval/plan.ts), once read. */
  approvals?: TurnApprovals | undefined;
}

/**
 * The turn once its first attempt has settled: the retry after a context overflow, the
 * failure's handling, then the lease released in every case. `first` is settled, so awaiting
 * it only reads its outcome or rethrows its error.
 */
async function settleTurn(
  run: TurnRun,
  first: Promise<TurnOutcome>,
  finalAttempt: boolean,
): Promise<TurnOutcome> {
  const { deps, lane, logger, batch } = run;
  const { store } = deps;
  const { chatKey, runId } = lane;
  let outcome: TurnOutcome | undefined;
  try {
    try {
      outcome = await first;
    } catch (err) {
      if (lane.lost || !deps.compactNow || !isContextOverflowError(err)) throw err;
      await store.appendEvent(chatKey, 'turn.overflow', { runId, error: (err as Error).message });
      // If compaction cannot run, the retry still goes out under a smaller hard budget.
      await deps
        .compactNow(chatKey)
        .catch((e: unknown) => logger.warn({ err: e }, 'overflow compaction failed'));
      outcome = await turnBody(run, OVERFLOW_BUDGET_SCALE);
    }
    if (outcome.status === 'done') deps.modelHealth?.succeeded();
    await run.reply?.close(outcome.status === 'done' ? [{ type: 'finish' }] : [{ type: 'abort' }]);
    return outcome;
  } catch (err) {
    if (lane.stopped) {
      // Another worker answers these messages: followers of this reply wait for that one.
      await run.reply?.close([{ type: 'abort' }]);
      await store.appendEvent(chatKey, 'turn.aborted', { runId, reason: 'shutdown' }).catch(() => undefined);
      throw new TurnAbortedError('worker shut down before the turn committed; retrying elsewhere');
    }
    if (lane.lost) {
      outcome = { status: 'lost', runId };
      return outcome;
    }
    try {
      // A resumed turn answers no message: on its last attempt its requests are settled instead.
      outcome =
        (await settleResumeFailure(deps, lane, logger, { ...run, finalAttempt }, err)) ??
        (await settleFailedTurn(deps, lane, logger, { batch, usage: run.usage }, err, finalAttempt));
    } catch (retried) {
      // The job retries: its next turn answers these messages.
      await run.reply?.close([{ type: 'abort' }]);
      throw retried;
    }
    await run.reply?.close([{ type: 'error', errorText: 'the message could not be answered' }]);
    return outcome;
  } finally {
    deps.running?.untrack(lane);
    deps.typing?.stop(chatKey);
    // Calls no commit or fail wrote (a model failure, a stop): the release records them, fenced.
    const released = await lane.release(run.usage.take()).catch((err: unknown) => {
      logger.warn({ err }, 'lease release failed; it will expire');
      return { ok: false, pending: 0 };
    });
    if (outcome && outcome.status !== 'busy' && outcome.status !== 'lost') outcome.pending = released.pending;
    // After the release: deleting the directory need not hold the chat.
    await run.workspace?.close();
  }
}

/**
 * One attempt: read and assemble the input, run the tool loop, commit. The commit is chained
 * to the loop, so this frame ends when the loop starts: its registers held the loaded input
 * and the compressed and assembled messages (the SDK keeps its own model messages), all dead
 * once the loop has them. The loop's callbacks and the commit keep only what they read.
 */
async function turnBody(run: TurnRun, budgetScale: number): Promise<TurnOutcome> {
  const { deps, lane, logger, sent: sendState, batch } = run;
  const { store, settings } = deps;
  const { chatKey, runId, fence } = lane;
  const started = Date.now();
  // A retry after a compaction reads the pending messages anew, earlier merges among them.
  run.merged = 0;

  // The read taken with the lease on the first pass; a retry after a compaction reads anew.
  const loaded = await inSpan('chatlane.provider', {}, () => deps.provider.load(chatKey, lane.takeInput()));
  // Tool approval: answers to apply, requests to settle (approval/plan.ts); usually nothing.
  const approvals = deps.approvals
    ? await planApprovals(
        {
          store,
          chatKey,
          runId,
          onMessage: deps.approvals.onMessage,
          now: Date.now(),
          earlierSends: lane.uncommitted.length > 0,
        },
        loaded,
      )
    : undefined;
  if (approvals === 'idle' || (!approvals && loaded.pending.length === 0))
    return { status: 'idle', pending: 0 };
  run.approvals = approvals;
  const resuming = approvals?.kind === 'resume';
  deps.typing?.start(chatKey, lane.route);
  const counted = await countedPending(
    approvals ? approvals.messages : loaded.pending,
    settings.maxCharsPerMessage,
  );
  // A resumed turn answers no message of a person: it goes on from the answered calls.
  const pending = resuming ? counted : await reachEarlierSends(deps, lane, counted);
  // What fails if the turn cannot go on: a person's messages, never an answer (it is not one).
  batch.splice(0, batch.length, ...pending);
  if (run.span)
    addLinks(
      run.span,
      pending.map((e) => e.message.metadata.traceparent),
    );
  const pendingMessages = pending.map((e) => e.message);
  // What this turn answers, with the replies a crashed earlier run already sent in place.
  const turn = await withEarlierSends(pending, lane.uncommitted, {
    chatKey,
    runId,
    maxCharsPerMessage: settings.maxCharsPerMessage,
  });
  // CHAT_DAILY_TOKEN_BUDGET: over it, the messages are kept and the model is not called. A
  // resumed turn finishes what a person approved.
  const held = resuming ? undefined : await holdIfOverBudget(deps, lane, logger, pending, turn);
  if (held) return held;

  // What the chat holds decides the tools the turn offers, and the prompt names only those.
  const offer = chatToolsOf(deps).forTurn(loaded, deps.mcp?.tools());
  const answerMessages = approvals?.answers.map((e) => e.message) ?? [];
  const context = runtimeContext(
    chatKey,
    pendingMessages.length > 0 ? pendingMessages : answerMessages,
    loaded,
    offer.offered,
  );
  // The history as the model reads it: requests settled before the loop show their outcome.
  const history = approvals?.history ?? loaded.history;
  // This turn's own messages: the answered calls first (never stored), then what it answers.
  const own = approvals?.resume ? [approvals.resume, ...turn.messages] : turn.messages;
  // The compressed input is the history's kept tail, then this turn's messages (always kept).
  const historyCount = (kept: number) => Math.max(0, kept - own.length);
  // Everything of the input that is not a message: system prompt (memory included), tool
  // definitions the tokenizer does not see, the operator's MCP tools and the program's own.
  const fixedTokens =
    deps.assembler.systemTokens(context) +
    budgetLineTokens() +
    settings.reserveTokens +
    (deps.mcp?.toolTokens() ?? 0) +
    (deps.customTools?.tokens ?? 0);
  const budget = Math.floor((settings.maxInputTokens - fixedTokens) * budgetScale);
  const compressed = inSpanSync('chatlane.compressor', {}, () =>
    deps.compressor.compress([...history, ...own], budget),
  );
  if (shouldReport(compressed.report)) {
    await store.appendEvent(chatKey, 'context.compressed', { runId, ...compressed.report });
  }
  const assembled = await inSpan('chatlane.assembler', {}, () =>
    deps.assembler.assemble({
      context,
      messages: compressed.messages,
      historyCount: historyCount(compressed.messages.length),
      nearlyFull: isNearlyFull(fixedTokens + compressed.report.keptTokens, settings.maxInputTokens),
    }),
  );
  // Mid-turn arrivals ride on requests already carrying this input: they get what is left
  // of MAX_INPUT_TOKENS, the rest wait for the next turn (never merged past the limit).
  const mergeRoom = createMergeRoom(
    Math.floor(settings.maxInputTokens * budgetScale),
    fixedTokens - settings.reserveTokens + compressed.report.keptTokens,
  );
  // A resumed turn merges what came after its answers; with none (an expiry), what comes at all.
  let lastSeen = pending.at(-1)?.streamId ?? approvals?.answers.at(-1)?.streamId ?? '0-0';
  // The user messages the turn answers: what the tools given in code see as messageIds.
  const answered = [...pendingMessages];
  // When a chat_send of the step that just ended found no message after lastSeen (which only
  // the next step's merge moves): that look at the inbox, as fresh as a read.
  let quietAt: number | undefined;
  const control: LoopControl = {};
  const toolTurnState = toolTurn({
    store,
    chatKey,
    fence,
    runId,
    logger,
    maxSendsPerTurn: settings.maxSendsPerTurn,
    deliver: deps.deliver,
    sends: sendState,
    seen: () => lastSeen,
    inboxChecked: (arrived) => {
      quietAt = arrived ? undefined : Date.now();
    },
    reply: run.reply,
    fencedOut: (reason) => lane.markLost(reason),
    writeFailed: (err) => lane.failWrite(err),
    checkConnection: () => store.assertSameConnection(chatKey, lane.acquiredOn),
    rebase: async (contextMessages) => {
      const next = deps.compressor.compress([...contextMessages, ...own], budget);
      control.rebase = (
        await deps.assembler.assemble({
          context,
          messages: next.messages,
          historyCount: historyCount(next.messages.length),
        })
      ).messages;
      // Later requests carry the new context, not the input the turn started with.
      mergeRoom.rebase(fixedTokens - settings.reserveTokens + next.report.keptTokens);
    },
    workspace: run.workspace,
  });

  const inputMessages = compressed.messages.length;
  const reply = run.reply;
  // A resumed reply goes on with the message that asked, as a page shows it (approval/plan.ts).
  reply?.open(
    [...pendingMessages, ...answerMessages].map((m) => m.id),
    approvals?.continues,
  );
  const chunker = reply && new UiChunker((chunk) => reply.chunk(chunk));
  // Not streamed: the whole reply goes with the commit, for a reader that came meanwhile.
  const replies = deps.replies;
  if (!reply && replies)
    run.lateReply = (response, messageIds) => ({
      ...replies.tail(
        chatKey,
        runId,
        wholeReplyFields(response, messageIds, approvals?.continues ?? assistantMessageId(runId)),
      ),
      unstreamed: messageIds,
    });
  // LANE_POLICY=interrupt: a message announced while the model call is under way aborts it.
  if (deps.arrivals && !run.interrupt) run.interrupt = new StepInterrupt();
  const lanePolicy =
    deps.arrivals &&
    run.interrupt &&
    watchForInterrupts(deps.arrivals, {
      store,
      chatKey,
      runId,
      logger,
      interrupt: run.interrupt,
      turn: { lastSeen: () => lastSeen, merged: () => run.merged, maxMerges: settings.maxMerges },
      cut: () => chunker?.cut(),
    });
  const onceTurn = {
    store,
    chatKey,
    fence,
    runId,
    logger,
    limits: settings.once ?? DEFAULT_ONCE_LIMITS,
    fencedOut: (reason: string) => lane.markLost(reason),
  };
  return runLoop<InboxEntry>({
    model: deps.model,
    system: assembled.system,
    messages: assembled.messages,
    providerOptions: cacheKeyOptions(chatKey),
    // The calls a person approved run at most once, whatever happens to this turn (guard.ts).
    tools: resuming ? guardApproved(offer.tools, approvedCalls(approvals), onceTurn) : offer.tools,
    activeTools: offer.active,
    ...(deps.approvals?.toolApproval && { toolApproval: deps.approvals.toolApproval }),
    ...(deps.approvals && { toolApprovalSecret: await deps.approvals.secret() }),
    toolsContext: toolsContextOf(offer, toolTurnState, () => ({ ...onceTurn, messages: () => answered })),
    maxSteps: settings.maxSteps,
    maxMerges: settings.maxMerges,
    ...(settings.stepTimeoutMs ? { stepTimeoutMs: settings.stepTimeoutMs } : {}),
    abort: lane,
    control,
    responseId: `${runId}-a`,
    logger,
    nextArrivals: async (max, responses, fresh) => {
      const checked = quietAt;
      quietAt = undefined;
      // The step's chat_send read the inbox moments ago: a message since then starts the next
      // turn, as one arriving during the next model call would (a round trip less per step).
      // An interrupt's read is never skipped: it was told of a message.
      if (
        !fresh &&
        checked !== undefined &&
        Date.now() - checked <= (settings.freshInboxMs ?? FRESH_INBOX_MS)
      )
        return [];
      const entries = await store.readInbox(chatKey, max, lastSeen);
      if (entries.length === 0) return [];
      const room = mergeRoom.left(responses);
      const fitting: InboxEntry[] = [];
      let used = 0;
      for (const e of entries) {
        // An approval answer is the next turn's to apply, and so is every message after it.
        if (answerOf(e.message)) break;
        const message = await withTokens(e.message, settings.maxCharsPerMessage);
        const tokens = viewTokens(message, settings.maxCharsPerMessage) + contextBlockTokens(message);
        // Oldest first and no gaps: a message that does not fit waits, and so does every later one.
        if (used + tokens > room) break;
        fitting.push({ streamId: e.streamId, message });
        used += tokens;
      }
      mergeRoom.take(used);
      run.merged += fitting.length;
      if (fitting.length > 0) lastSeen = fitting.at(-1)!.streamId;
      for (const e of fitting) answered.push(e.message);
      linkMerged(run.span, fitting);
      return fitting;
    },
    // As the assembler shows them: the next turn's history then carries them byte for byte.
    toModel: (items) => deps.assembler.toModel(items.map((e) => e.message)),
    ...(deps.download && { download: deps.download }),
    ...(run.workspace && deps.shell && { sandbox: deps.shell.session(run.workspace) }),
    usage: run.usage,
    ...(chunker && {
      onPart: (part) => chunker.push(part),
      onMerge: (items) => reply?.merged(items.map((e) => e.message.id)),
    }),
    ...lanePolicy?.loop,
  }).then(
    (loop) => {
      lanePolicy?.unwatch();
      // A stop cuts a send short: its text part is closed before the reply's finish.
      chunker?.closeOpen();
      return inSpan('chatlane.commit', {}, () =>
        commitTurn(run, loop, {
          started,
          pending,
          turn,
          toolTurnState,
          inputMessages,
          budget,
          approvals,
          answered,
        }),
      );
    },
    (err: unknown) => {
      lanePolicy?.unwatch();
      throw err;
    },
  );
}
