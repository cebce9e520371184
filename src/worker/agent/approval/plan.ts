import type { UIMessage } from 'ai';
import type { ChatMessage } from '../../../shared/messages.js';
import {
  type ApprovalOutcome,
  type ApprovalRecord,
  type ApprovalRequest,
  answerOf,
  listApprovals,
} from '../../../shared/store/approvals.js';
import type { ChatStore, InboxEntry } from '../../../shared/store/chat-store.js';
import { readOnce } from '../../../shared/store/once.js';
import type { ProviderResult } from '../../pipeline/types.js';
import { approvalOnceKey, knownOutcome } from './guard.js';

/**
 * What a turn does about tool approvals before it runs the model (docs/approvals.md, "The
 * lane"). The chat's pending entries, oldest first, decide:
 * - answers first (entries approval-answer.lua queued): the turn *resumes*. It consumes them,
 *   and the model's input ends with the answered calls in `approval-responded`: the AI SDK runs
 *   the approved ones and records the denied ones (`execution-denied`) before its first step,
 *   and the model goes on from their outcome. Requests past their expiry are settled with them
 *   (denied, `expired`).
 * - a person's message first: the turn answers it (and the messages after it, up to the next
 *   answer). Open requests past their expiry are denied (`expired`) and, with
 *   TOOL_APPROVAL_ON_MESSAGE=supersede, every other open request too (`superseded`): their
 *   parts are final before the model reads the history.
 * - nothing pending (a request's expiry job): requests past their expiry are settled as a
 *   resume, denied `expired`; with none, the turn is idle.
 */

type Part = UIMessage['parts'][number];

/** A tool part as chatlane reads it (tool-<name> or dynamic-tool). */
export interface ToolPartView {
  type: string;
  toolCallId: string;
  toolName?: string;
  state: string;
  input?: unknown;
  output?: unknown;
  errorText?: string;
  approval?: {
    id: string;
    approved?: boolean;
    reason?: string;
    requestReason?: string;
    isAutomatic?: boolean;
    signature?: string;
  };
}

export function toolPartOf(part: Part): ToolPartView | undefined {
  const p = part as unknown as Partial<ToolPartView>;
  if (typeof p.type !== 'string' || typeof p.toolCallId !== 'string') return undefined;
  if (!p.type.startsWith('tool-') && p.type !== 'dynamic-tool') return undefined;
  return p as ToolPartView;
}

/** The name of a tool part's tool. */
export function toolNameOf(part: ToolPartView): string {
  return part.type === 'dynamic-tool' ? (part.toolName ?? '') : part.type.slice('tool-'.length);
}

/** The approval ids of a message's parts that wait for a person. */
export function requestedIds(message: ChatMessage): string[] {
  const out: string[] = [];
  for (const part of message.parts) {
    const p = toolPartOf(part);
    if (p?.state === 'approval-requested' && p.approval?.id && !p.approval.isAutomatic)
      out.push(p.approval.id);
  }
  return out;
}

/** How a settled call's part ends. */
export type Final =
  | { state: 'output-available'; output: unknown }
  | { state: 'output-error'; errorText: string }
  | { state: 'output-denied' };

/** One request a turn settles. */
export interface Settlement {
  request: ApprovalRequest;
  outcome: ApprovalOutcome;
  approved: boolean;
  reason?: string | undefined;
  by?: string | undefined;
  /** Known before the loop: the part is final in the model's input. Absent: the SDK settles it. */
  final?: Final;
}

export interface TurnApprovals {
  kind: 'resume' | 'answer';
  /** The answer entries the turn consumes (resume), oldest first. */
  answers: InboxEntry[];
  /** The person's messages the turn answers (answer): the pending ones before the first answer entry. */
  messages: InboxEntry[];
  settle: Settlement[];
  /** The history as the model reads it: parts settled before the loop are final in their messages. */
  history: ChatMessage[];
  /**
   * The turn's first message (resume): the calls the SDK settles, in `approval-responded`, and
   * calls settled before the loop whose message is not in the history window. Never stored.
   */
  resume: ChatMessage | undefined;
  /** The history messages (as loaded) holding settled parts, by id. */
  holders: Map<string, ChatMessage>;
  /** The message a page goes on with (resume): the newest holder, when it is the history's last. */
  continues: string | undefined;
  /** Who the settled requests were for: requests the resumed turn makes are for them too. */
  people: string[];
}

export interface PlanContext {
  store: ChatStore;
  chatKey: string;
  runId: string;
  onMessage: 'supersede' | 'keep';
  now: number;
  /** A crashed run of this chat left sends: every settled call is settled before the loop. */
  earlierSends: boolean;
}

/** What an interrupted resume says of an approved call it never saw start. */
const NOT_RUN =
  'The approved call did not run: the turn that was to run it was interrupted after it had already replied.';

const DENIED: Final = { state: 'output-denied' };

/**
 * The turn's approval work, `idle` when it has nothing at all to do (no message, no request
 * past its expiry), or undefined when approvals play no part in it (the common case: no answer
 * pending, no request in the history window; no read is made).
 */
export async function planApprovals(
  ctx: PlanContext,
  loaded: ProviderResult,
): Promise<TurnApprovals | 'idle' | undefined> {
  const { pending, history } = loaded;
  const requested = new Map<string, ChatMessage>();
  for (const m of history) {
    if (m.role !== 'assistant') continue;
    for (const id of requestedIds(m)) requested.set(id, m);
  }
  const hasAnswer = pending.some((e) => answerOf(e.message));
  if (requested.size === 0 && !hasAnswer && pending.length > 0) return undefined;

  const records = await listApprovals(ctx.store, ctx.chatKey);
  const byId = new Map(records.map((r) => [r.request.id, r]));
  const open = records.filter((r) => r.state === 'open');
  const expired = open.filter((r) => r.request.expiresAt <= ctx.now);
  const leading = takeWhile(pending, (e) => answerOf(e.message) !== undefined);

  if (leading.length > 0) {
    const settle: Settlement[] = [];
    const seen = new Set<string>();
    for (const e of leading) {
      const id = answerOf(e.message)!.approvalId;
      const r = byId.get(id);
      // An answer whose request is gone or settled already is consumed and changes nothing.
      if (r?.state !== 'answered' || !r.answer || seen.has(id)) continue;
      seen.add(id);
      settle.push({
        request: r.request,
        outcome: r.answer.approved ? 'approved' : 'denied',
        approved: r.answer.approved,
        reason: r.answer.reason,
        by: r.answer.by,
      });
    }
    for (const r of expired) if (!seen.has(r.request.id)) settle.push(expiredOf(r));
    return resume(ctx, loaded, settle, leading);
  }
  if (pending.length > 0) {
    const settle: Settlement[] = expired.map((r) => ({ ...expiredOf(r), final: DENIED }));
    if (ctx.onMessage === 'supersede') {
      for (const r of open) {
        if (r.request.expiresAt <= ctx.now) continue;
        settle.push({
          request: r.request,
          outcome: 'superseded',
          approved: false,
          reason: 'superseded',
          final: DENIED,
        });
      }
    }
    const messages = takeWhile(pending, (e) => !answerOf(e.message));
    return build(ctx.chatKey, 'answer', loaded, settle, [], messages);
  }
  if (expired.length === 0) return 'idle';
  return resume(ctx, loaded, expired.map(expiredOf), []);
}

function expiredOf(r: ApprovalRecord): Settlement {
  return { request: r.request, outcome: 'expired', approved: false, reason: 'expired' };
}

function takeWhile<T>(items: readonly T[], keep: (item: T) => boolean): T[] {
  const out: T[] = [];
  for (const item of items) {
    if (!keep(item)) break;
    out.push(item);
  }
  return out;
}

/**
 * A resuming turn: approved calls already started (a crashed earlier run) are settled from
 * their once records, never run again; after a crashed run that had replied, every call is
 * settled before the loop (the input then ends with those replies, not with the answers).
 */
async function resume(
  ctx: PlanContext,
  loaded: ProviderResult,
  settle: Settlement[],
  answers: InboxEntry[],
): Promise<TurnApprovals> {
  const approved = settle.filter((s) => s.approved);
  const once = await readOnce(
    ctx.store,
    ctx.chatKey,
    approved.map((s) => approvalOnceKey(s.request.id)),
  );
  for (const s of settle) {
    if (s.approved) {
      const known = knownOutcome(once.get(approvalOnceKey(s.request.id)));
      if (known)
        s.final =
          known.kind === 'result'
            ? { state: 'output-available', output: known.output }
            : { state: 'output-error', errorText: known.error };
      else if (ctx.earlierSends) s.final = { state: 'output-error', errorText: NOT_RUN };
    } else if (ctx.earlierSends) s.final = DENIED;
  }
  return build(ctx.chatKey, 'resume', loaded, settle, answers, []);
}

function build(
  chatKey: string,
  kind: TurnApprovals['kind'],
  loaded: ProviderResult,
  settle: Settlement[],
  answers: InboxEntry[],
  messages: InboxEntry[],
): TurnApprovals {
  const holders = new Map<string, ChatMessage>();
  const byCall = new Map(settle.map((s) => [s.request.toolCallId, s]));
  const inHistory = new Set<string>();
  for (const m of loaded.history) {
    if (m.role !== 'assistant') continue;
    for (const part of m.parts) {
      const p = toolPartOf(part);
      const s = p && byCall.get(p.toolCallId);
      if (s && p.approval?.id === s.request.id) {
        holders.set(m.id, m);
        inHistory.add(s.request.id);
      }
    }
  }
  // Parts known final are shown so in their messages; the rest wait (`approval-requested` is
  // not shown to the model) and go into the resume message.
  const history = loaded.history.map((m) =>
    holders.has(m.id)
      ? withParts(
          m,
          settle.filter((s) => s.final),
          'final',
        )
      : m,
  );
  const resumeParts: Part[] = [];
  for (const s of settle) {
    if (!s.final) resumeParts.push(partFor(s, 'responded'));
    else if (!inHistory.has(s.request.id) && kind === 'resume') resumeParts.push(partFor(s, 'final'));
  }
  const last = loaded.history.at(-1);
  const newest = settle.map((s) => s.request.messageId).findLast((id) => holders.has(id));
  return {
    kind,
    answers,
    messages,
    settle,
    history,
    resume:
      resumeParts.length > 0
        ? {
            id: 'approval-resume',
            role: 'assistant',
            parts: [{ type: 'step-start' }, ...resumeParts],
            metadata: { ts: Date.now(), chatKey, kind: 'normal' },
          }
        : undefined,
    holders,
    continues: kind === 'resume' && newest !== undefined && newest === last?.id ? newest : undefined,
    people: [...new Set(settle.flatMap((s) => s.request.people))],
  };
}

/** The approval a settled part carries, as the AI SDK's UI message keeps it. */
function approvalOf(s: Settlement): NonNullable<ToolPartView['approval']> {
  return {
    id: s.request.id,
    approved: s.approved,
    ...(s.reason !== undefined && { reason: s.reason }),
    ...(s.request.reason !== undefined && { requestReason: s.request.reason }),
    ...(s.request.signature !== undefined && { signature: s.request.signature }),
  };
}

/** The fields a part takes when it is settled `final` (or answered: `approval-responded`). */
function settledFields(s: Settlement, how: 'final' | 'responded', final?: Final): Record<string, unknown> {
  const approval = approvalOf(s);
  if (how === 'responded' || !final) return { state: 'approval-responded', approval };
  return { ...final, approval };
}

/** A settled call's part built from its request (its message is not at hand). */
export function partFor(s: Settlement, how: 'final' | 'responded', final = s.final): Part {
  const { request } = s;
  const base = request.dynamic
    ? { type: 'dynamic-tool', toolName: request.tool, toolCallId: request.toolCallId, input: request.input }
    : { type: `tool-${request.tool}`, toolCallId: request.toolCallId, input: request.input };
  return { ...base, ...settledFields(s, how, final) } as unknown as Part;
}

/**
 * `message` with the parts of `settled` final: `finals` gives each call's final state (default:
 * the settlement's own). Other parts are kept as they are.
 */
export function withParts(
  message: ChatMessage,
  settled: readonly Settlement[],
  how: 'final',
  finals?: ReadonlyMap<string, Final>,
): ChatMessage {
  const byCall = new Map(settled.map((s) => [s.request.toolCallId, s]));
  let changed = false;
  const parts = message.parts.map((part) => {
    const p = toolPartOf(part);
    const s = p && byCall.get(p.toolCallId);
    if (!p || !s || p.approval?.id !== s.request.id) return part;
    const final = finals?.get(p.toolCallId) ?? s.final;
    if (!final) return part;
    changed = true;
    const { output: _o, errorText: _e, ...rest } = p;
    return { ...rest, ...settledFields(s, how, final) } as unknown as Part;
  });
  if (!changed) return message;
  // Its parts changed: its token count is counted again.
  const { tokens: _t, tokensMaxChars: _m, ...metadata } = message.metadata;
  return { ...message, parts, metadata };
}

/** The calls the SDK runs for this turn because a person approved them: tool call id → approval. */
export function approvedCalls(
  approvals: TurnApprovals | undefined,
): Map<string, { approvalId: string; tool: string }> {
  const out = new Map<string, { approvalId: string; tool: string }>();
  for (const s of approvals?.settle ?? []) {
    if (s.approved && !s.final)
      out.set(s.request.toolCallId, { approvalId: s.request.id, tool: s.request.tool });
  }
  return out;
}
