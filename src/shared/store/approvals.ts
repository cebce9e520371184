import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { toolApprovalSecretKey } from '../keys.js';
import type { ChatMessage } from '../messages.js';
import { parseJsonAs } from '../parse-json.js';
import { storedJson } from '../storable.js';
import type { ChatStore } from './chat-store.js';
import { tuple } from './records.js';
import { scripts } from './scripts.js';

/**
 * Tool approval requests in the chat's slot (docs/approvals.md). The approvals hash holds, per
 * request id, three fields, each written once by one writer:
 * - `<id>`: the request, written by the commit of the turn that made it (commit.lua);
 * - `<id>:a`: a person's answer, written by approval-answer.lua, which also queues the answer
 *   in the chat's inbox as an entry of its own (so the chat's next turn applies it, in order);
 * - `<id>:r`: how the request was settled, written by the commit of the turn that settled it.
 */

/** What an approval id looks like (the AI SDK's ids are `aitxt-` and 24 letters and digits). */
export const approvalIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,100}$/, 'not an approval id');

export const approvalRequestSchema = z.object({
  id: z.string(),
  toolCallId: z.string(),
  tool: z.string(),
  input: z.unknown(),
  /** The AI SDK's HMAC over approval id, call id, tool and input (experimental_toolApprovalSecret). */
  signature: z.string().optional(),
  /** Why the rule asked, when it said (shown to the person). */
  reason: z.string().optional(),
  /** The tool part is `dynamic-tool` (an MCP tool), not `tool-<name>`. */
  dynamic: z.boolean().optional(),
  /** The history message holding the call's tool part. */
  messageId: z.string(),
  runId: z.string(),
  requestedAt: z.number(),
  expiresAt: z.number(),
  /**
   * Who may answer from a chat platform: the user ids of the messages the requesting turn
   * answered. Empty: the chat's access rules alone decide (API token, browser token).
   */
  people: z.array(z.string()),
});
export type ApprovalRequest = z.infer<typeof approvalRequestSchema>;

export const approvalAnswerSchema = z.object({
  approved: z.boolean(),
  reason: z.string().optional(),
  /** `api`, `web`, `<platform>:<userId>`. */
  by: z.string(),
  at: z.number(),
});
export type ApprovalAnswer = z.infer<typeof approvalAnswerSchema>;

export const APPROVAL_OUTCOMES = ['approved', 'denied', 'expired', 'superseded'] as const;
export type ApprovalOutcome = (typeof APPROVAL_OUTCOMES)[number];

export const approvalResolutionSchema = z.object({
  outcome: z.enum(APPROVAL_OUTCOMES),
  reason: z.string().optional(),
  by: z.string().optional(),
  at: z.number(),
  runId: z.string(),
});
export type ApprovalResolution = z.infer<typeof approvalResolutionSchema>;

/** One request as its chat holds it now. */
export interface ApprovalRecord {
  request: ApprovalRequest;
  answer: ApprovalAnswer | undefined;
  resolution: ApprovalResolution | undefined;
  /** open: waits for an answer; answered: the answer waits for the chat's next turn; resolved: settled. */
  state: 'open' | 'answered' | 'resolved';
}

function recordOf(
  request: ApprovalRequest,
  answerRaw: string | null | undefined,
  resolutionRaw: string | null | undefined,
): ApprovalRecord {
  const answer = parseJsonAs(approvalAnswerSchema, answerRaw);
  const resolution = parseJsonAs(approvalResolutionSchema, resolutionRaw);
  const state = resolution ? 'resolved' : answer ? 'answered' : 'open';
  return { request, answer, resolution, state };
}

/** Every request the chat still holds (settled ones until they are forgotten), oldest first. */
export async function listApprovals(store: ChatStore, chatKey: string): Promise<ApprovalRecord[]> {
  const all = await store.redis.hgetall(store.keys(chatKey).approvals);
  const out: ApprovalRecord[] = [];
  for (const [field, raw] of Object.entries(all)) {
    if (field.includes(':')) continue;
    const request = parseJsonAs(approvalRequestSchema, raw);
    if (request) out.push(recordOf(request, all[`${field}:a`], all[`${field}:r`]));
  }
  return out.sort((a, b) => a.request.requestedAt - b.request.requestedAt);
}

/** The requests of `ids` the chat holds (unknown and unreadable ones are left out). */
export async function readApprovals(
  store: ChatStore,
  chatKey: string,
  ids: readonly string[],
): Promise<Map<string, ApprovalRecord>> {
  const out = new Map<string, ApprovalRecord>();
  if (ids.length === 0) return out;
  const fields = ids.flatMap((id) => [id, `${id}:a`, `${id}:r`]);
  const raw = await store.redis.hmget(store.keys(chatKey).approvals, ...fields);
  ids.forEach((id, i) => {
    const request = parseJsonAs(approvalRequestSchema, raw[i * 3]);
    if (request) out.set(id, recordOf(request, raw[i * 3 + 1], raw[i * 3 + 2]));
  });
  return out;
}

/** The part type of the inbox entry that carries an answer: no person's message has it. */
export const ANSWER_PART = 'data-chatlane-approval';

const answerDataSchema = z.object({
  approvalId: z.string(),
  approved: z.boolean(),
  reason: z.string().optional(),
  by: z.string(),
});
export type AnswerData = z.infer<typeof answerDataSchema>;

/** The answer an inbox message carries, when it is one (approval-answer.lua wrote it). */
export function answerOf(message: ChatMessage): AnswerData | undefined {
  const part = message.parts[0] as { type: string; data?: unknown } | undefined;
  if (message.parts.length !== 1 || part?.type !== ANSWER_PART) return undefined;
  const data = answerDataSchema.safeParse(part.data);
  return data.success ? data.data : undefined;
}

/** The inbox message id of an answer: one per request (approval-answer.lua stores it once). */
export function answerMessageId(approvalId: string): string {
  return `approval:${approvalId}`;
}

export type AnswerResult =
  | { status: 'accepted'; streamId: string }
  | { status: 'unknown' }
  | { status: 'answered'; answer: ApprovalAnswer | undefined }
  | { status: 'resolved'; resolution: ApprovalResolution | undefined }
  | { status: 'expired'; expiresAt: number }
  | { status: 'superseded' };

/**
 * Store a person's answer once and queue it in the chat's inbox (approval-answer.lua). The
 * caller enqueues the chat's turn after `accepted`. `supersede`: a person's message already
 * waiting in the inbox settles the request first (TOOL_APPROVAL_ON_MESSAGE=supersede).
 * `watchMs`: the sender waits for the reply; an answer stored now or before marks the chat
 * watched for this long in the same script (a refused one does not).
 */
export async function answerApproval(
  store: ChatStore,
  chatKey: string,
  approvalId: string,
  answer: Omit<ApprovalAnswer, 'at'> & { channel?: string | undefined },
  opts: { supersede: boolean; now?: number; watchMs?: number },
): Promise<AnswerResult> {
  const at = opts.now ?? Date.now();
  const { channel, ...stored } = answer;
  const data: AnswerData = {
    approvalId,
    approved: answer.approved,
    by: answer.by,
    ...(answer.reason !== undefined && { reason: answer.reason }),
  };
  const message: ChatMessage = {
    id: answerMessageId(approvalId),
    role: 'user',
    parts: [{ type: ANSWER_PART, data } as unknown as ChatMessage['parts'][number]],
    metadata: { ts: at, chatKey, kind: 'normal', ...(channel !== undefined && { channel }) },
  };
  const k = store.keys(chatKey);
  const raw = tuple.parse(
    await scripts.approvalAnswer.run(
      store.redis,
      [k.approvals, k.inbox, k.watch],
      [
        approvalId,
        JSON.stringify({ ...stored, at }),
        message.id,
        storedJson(message, { tooDeep: 'throw' }),
        opts.supersede ? '1' : '',
        opts.watchMs ?? '',
      ],
    ),
  );
  switch (raw[0]) {
    case 'accepted':
      return { status: 'accepted', streamId: String(raw[1]) };
    case 'unknown':
      return { status: 'unknown' };
    case 'answered':
      return { status: 'answered', answer: parseJsonAs(approvalAnswerSchema, String(raw[1])) };
    case 'resolved':
      return { status: 'resolved', resolution: parseJsonAs(approvalResolutionSchema, String(raw[1])) };
    case 'expired':
      return { status: 'expired', expiresAt: Number(raw[1]) };
    case 'superseded':
      return { status: 'superseded' };
    default:
      throw new Error(`approval-answer.lua answered ${raw[0]}`);
  }
}

/**
 * What a turn writes about approvals with its commit (includes/approvals.lua): requests it
 * made, requests it settled, history messages whose tool parts it changed, and an outbox card
 * per new request. Records, messages and events go as JSON text, written as given.
 */
export interface ApprovalPlan {
  open: Array<{ id: string; request: string; event: string }>;
  resolve: Array<{ id: string; resolution: string; event: string }>;
  rewrite: Array<{ id: string; json: string; tokens: number }>;
  cards: Array<{ json: string; text: string }>;
  keepMs: number;
  maxDone: number;
  outboxKeep: number;
  runId: string;
  ts: number;
  tp: string;
}

/** Settled requests a chat keeps (their ids answer 409 a while): past it the oldest are forgotten. */
export const MAX_SETTLED_APPROVALS = 200;

/** How long the approvals hash outlives its last write, beyond the request TTL. */
export const APPROVALS_KEEP_MS = 7 * 24 * 3600 * 1000;

export function approvalPlanJson(plan: ApprovalPlan): string {
  return JSON.stringify(plan);
}

/**
 * The key tool approval requests are signed with when TOOL_APPROVAL_SECRET is unset: made once
 * by the first worker that needs it (SET NX), then shared by every worker through Redis.
 */
export async function sharedApprovalSecret(store: ChatStore): Promise<string> {
  const key = toolApprovalSecretKey(store.prefix);
  const made = randomBytes(32).toString('base64url');
  await store.redis.set(key, made, 'NX');
  const secret = await store.redis.get(key);
  if (!secret) throw new Error('the tool approval key could not be read back from Redis');
  return secret;
}
