import type { UIMessage } from 'ai';
import { assistantMessageId, type ChatMessage } from '../../../shared/messages.js';
import { approvalText } from '../../../shared/platforms/approval-text.js';
import { storedJson } from '../../../shared/storable.js';
import {
  APPROVALS_KEEP_MS,
  type ApprovalPlan,
  type ApprovalRequest,
  type ApprovalResolution,
  approvalPlanJson,
  MAX_SETTLED_APPROVALS,
} from '../../../shared/store/approvals.js';
import { withTokens } from '../../../shared/tokens.js';
import type { ResumedCall } from '../loop.js';
import {
  type Final,
  partFor,
  type Settlement,
  type TurnApprovals,
  toolNameOf,
  toolPartOf,
  withParts,
} from './plan.js';

type Part = UIMessage['parts'][number];

/** What a turn's commit writes about approvals, and the messages it appends instead of its own. */
export interface ApprovalCommit {
  /** The messages the commit appends (the first may have gone into the message the page goes on with). */
  messages: ChatMessage[];
  /** The plan for commit.lua (store/approvals.ts), undefined when the turn neither made nor settled a request. */
  plan: string | undefined;
  /** Requests the turn made. */
  opened: ApprovalRequest[];
  /** Requests the turn settled. */
  settled: Settlement[];
}

export interface ApprovalCommitInput {
  approvals: TurnApprovals | undefined;
  chatKey: string;
  runId: string;
  now: number;
  ttlMs: number;
  /** What the turn appends, in order (its earlier sends, then its assistant messages and merges). */
  messages: ChatMessage[];
  /** What the SDK did with the answered calls before the first step. */
  resumed: readonly ResumedCall[];
  /** The user ids of the messages the turn answered: who its new requests are for. */
  people: readonly string[];
  maxCharsPerMessage: number;
  outboxKeep: number;
  traceparent?: string | undefined;
}

const NOT_SETTLED = 'The approved call did not run.';

/** How the SDK left a call it was to settle: its result or error, or its denial. */
function resumedFinal(call: ResumedCall | undefined, approved: boolean): Final {
  if (!call) return approved ? { state: 'output-error', errorText: NOT_SETTLED } : { state: 'output-denied' };
  if (call.kind === 'result') return { state: 'output-available', output: call.output };
  if (call.kind === 'error') return { state: 'output-error', errorText: call.error };
  return { state: 'output-denied' };
}

/**
 * The approval side of a turn's commit: the settled calls' parts made final where the history
 * holds them (a call whose message is out of reach goes first among the turn's own), the
 * resumed turn's reply joined to the message the page went on with, and every request the
 * turn's reply makes opened with a card for the chat's outbox.
 */
export async function approvalCommit(input: ApprovalCommitInput): Promise<ApprovalCommit> {
  const { approvals, runId, now } = input;
  let messages = [...input.messages];
  const settled = approvals?.settle ?? [];
  const resumed = new Map(input.resumed.map((c) => [c.toolCallId, c]));
  const finals = new Map<string, Final>(
    settled.map((s) => [
      s.request.toolCallId,
      s.final ?? resumedFinal(resumed.get(s.request.toolCallId), s.approved),
    ]),
  );

  const rewrites: ChatMessage[] = [];
  for (const holder of approvals?.holders.values() ?? []) {
    rewrites.push(withParts(holder, settled, 'final', finals));
  }
  const held = new Set(
    [...(approvals?.holders.values() ?? [])].flatMap((m) =>
      m.parts.flatMap((p) => toolPartOf(p)?.approval?.id ?? []),
    ),
  );
  const orphans =
    approvals?.kind === 'resume' ? settled.filter((s) => !held.has(s.request.id)) : ([] as Settlement[]);
  if (orphans.length > 0) {
    const parts = [
      { type: 'step-start' },
      ...orphans.map((s) => partFor(s, 'final', finals.get(s.request.toolCallId))),
    ] as Part[];
    messages.unshift({
      id: `${runId}-r0`,
      role: 'assistant',
      parts,
      metadata: { ts: now, chatKey: input.chatKey, runId, kind: 'normal' },
    });
  }
  // A page shows the resumed reply inside the message it answered (the stream went on with
  // it): history holds it the same way when that message is the history's last.
  const continues = approvals?.continues;
  const first = messages[0];
  if (continues && first?.role === 'assistant' && first.id === assistantMessageId(runId)) {
    const at = rewrites.findIndex((m) => m.id === continues);
    if (at >= 0) {
      rewrites[at] = { ...rewrites[at]!, parts: [...rewrites[at]!.parts, ...first.parts] };
      messages = messages.slice(1);
    }
  }
  const counted = await Promise.all(rewrites.map((m) => withTokens(m, input.maxCharsPerMessage)));

  const people = [...new Set([...input.people, ...(approvals?.people ?? [])])];
  const opened = [...counted, ...messages].flatMap((m) => requestsIn(m, input, people));
  if (settled.length === 0 && opened.length === 0) return { messages, plan: undefined, opened, settled };

  const plan: ApprovalPlan = {
    open: opened.map((r) => ({
      id: r.id,
      request: storedJson(r, { tooDeep: 'clip' }),
      event: storedJson(
        {
          approvalId: r.id,
          toolCallId: r.toolCallId,
          tool: r.tool,
          input: r.input,
          runId,
          messageId: r.messageId,
          expiresAt: r.expiresAt,
          ...(r.reason !== undefined && { reason: r.reason }),
        },
        { tooDeep: 'clip' },
      ),
    })),
    resolve: settled.map((s) => {
      const resolution: ApprovalResolution = {
        outcome: s.outcome,
        at: now,
        runId,
        ...(s.reason !== undefined && { reason: s.reason }),
        ...(s.by !== undefined && { by: s.by }),
      };
      return {
        id: s.request.id,
        resolution: JSON.stringify(resolution),
        event: JSON.stringify({
          approvalId: s.request.id,
          toolCallId: s.request.toolCallId,
          tool: s.request.tool,
          ...resolution,
          at: undefined,
        }),
      };
    }),
    rewrite: counted.map((m) => ({
      id: m.id,
      json: storedJson(m, { tooDeep: 'clip' }),
      tokens: m.metadata.tokens ?? 0,
    })),
    cards: opened.map((r) => ({
      json: storedJson(
        {
          id: r.id,
          tool: r.tool,
          input: r.input,
          expiresAt: r.expiresAt,
          ...(r.reason !== undefined && { reason: r.reason }),
        },
        { tooDeep: 'clip' },
      ),
      text: approvalText(r),
    })),
    keepMs: input.ttlMs + APPROVALS_KEEP_MS,
    maxDone: MAX_SETTLED_APPROVALS,
    outboxKeep: input.outboxKeep,
    runId,
    ts: now,
    tp: input.traceparent ?? '',
  };
  return { messages, plan: approvalPlanJson(plan), opened, settled };
}

/** The requests a message's parts make (a rule that answered at once makes none). */
function requestsIn(message: ChatMessage, input: ApprovalCommitInput, people: string[]): ApprovalRequest[] {
  if (message.role !== 'assistant') return [];
  const out: ApprovalRequest[] = [];
  for (const part of message.parts) {
    const p = toolPartOf(part);
    if (p?.state !== 'approval-requested' || !p.approval?.id || p.approval.isAutomatic) continue;
    out.push({
      id: p.approval.id,
      toolCallId: p.toolCallId,
      tool: toolNameOf(p),
      input: p.input,
      ...(p.approval.signature !== undefined && { signature: p.approval.signature }),
      ...(p.approval.requestReason !== undefined && { reason: p.approval.requestReason }),
      ...(p.type === 'dynamic-tool' && { dynamic: true }),
      messageId: message.id,
      runId: input.runId,
      requestedAt: input.now,
      expiresAt: input.now + input.ttlMs,
      people,
    });
  }
  return out;
}
