import { z } from 'zod';
import type { EventSink } from '../events.js';
import { type ChatMessage, parseStoredMessage } from '../messages.js';
import { parseJsonAs } from '../parse-json.js';
import type { ReplicaAcks } from '../replica-acks.js';
import type { StoreRetention } from '../retention.js';

/**
 * What the chat store reads and returns: the records of a chat's streams and the replies of
 * its scripts, with the zod schemas and parsers that turn raw Redis replies into them.
 */

export interface StoreOptions {
  prefix: string;
  maxEvents: number;
  /** Caps the scripts enforce (config: storeRetentionOf); defaults for the rest. */
  retention?: Partial<StoreRetention>;
  /** The clock that says which UTC day usage belongs to (tests move it to another day). */
  now?: () => number;
  /** REDIS_REPLICA_ACKS: the writes that must survive a failover are confirmed on replicas. */
  replicaAcks?: ReplicaAcks | undefined;
  /** Where the events this store writes go besides the chat's stream (a program's onEvent). */
  events?: EventSink | undefined;
}

export type IngestResult =
  | { status: 'accepted'; streamId: string; lane?: LaneState }
  | { status: 'duplicate' }
  | { status: 'full'; pending: number };

/**
 * The lane as the ingest script found it right after storing a message (asked for when the
 * message's channel debounces): whether a turn holds the chat, and when the burst began.
 */
export interface LaneState {
  leased: boolean;
  /** The inbox's oldest entry's time (Redis's clock, ms): the first message of the burst. */
  oldestMs: number;
  /** Redis's clock (ms) at the ingest. */
  nowMs: number;
}

/** What ingest does for the lane besides storing (see ingest.lua). */
export interface IngestLane {
  /** Return the lane's state (`LaneState`). */
  state?: boolean;
  /** LANE_POLICY=interrupt: while a turn holds the lease, tell it on this channel (at most `maxInterrupts` a turn). */
  notify?: { channel: string; maxInterrupts: number };
  /** The sender waits for the reply (POST /v1/ui): the chat is watched for this long (ms), set with the message. */
  watchMs?: number;
}

/**
 * A chat_send of a turn that has not committed (yet): the person may have seen it, history
 * does not hold it. `seen` is the last inbox stream id that turn had given its model when it
 * sent, so a takeover can place the reply after the messages it answered.
 */
export interface UncommittedSend {
  id: string;
  runId: string;
  fence: string;
  text: string;
  ts: number;
  seen: string;
}

const uncommittedSendSchema = z.object({
  id: z.string(),
  runId: z.string(),
  fence: z.string(),
  text: z.string(),
  ts: z.coerce.number(),
  seen: z.string(),
});

export { MAX_UNCOMMITTED_SENDS } from './uncommitted-limit.js';

/** How much of the chat a turn reads with its lease: the newest history, the oldest pending. */
export interface TurnReads {
  windowMessages: number;
  maxPending: number;
}

export const NO_READS: TurnReads = { windowMessages: 0, maxPending: 0 };

/**
 * What a turn starts from: the history window (plus the summary at the head), pending messages,
 * memory, and how much the chat has archived (which tools can act: chat-tools.ts).
 */
export interface TurnInput {
  window: HistoryWindow;
  pending: InboxEntry[];
  memory: string | undefined;
  /** Entries in the chat's archive (what compaction summarised away). */
  archived: number;
  /** Archived contexts (context switches). */
  contexts: number;
}

export type AcquireResult =
  | {
      ok: true;
      fence: string;
      uncommitted: UncommittedSend[];
      /** The chat's reply route as stored (meta.route), if it has one. */
      route: string | undefined;
      /** Read under the new lease, in the same round trip (empty for `NO_READS`). */
      input: TurnInput;
      /** The run whose reply stream is still open (meta.uiRun): one that died mid-reply. */
      openReply: string | undefined;
      /** Someone can watch the chat's replies (its watch key exists): REPLY_STREAMING=auto streams the turn. */
      watched: boolean;
    }
  | { ok: false; ttlMs: number };

const isString = (v: unknown): v is string => typeof v === 'string';
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString);
const isStringOrNull = (v: unknown) => v === null || typeof v === 'string';
const isStreamEntry = (v: unknown) => Array.isArray(v) && v.length === 2 && isString(v[0]) && isStrings(v[1]);

/** acquire.lua's replies (Lua false arrives as null), told apart by their first element. */
export const acquireBusy = z.tuple([z.literal('busy'), z.number()]);

type AcquireOkReply = [
  status: 'ok',
  fence: number,
  uncommitted: string[],
  route: string | null,
  head: string | null,
  window: string[],
  histLen: number,
  pending: StreamEntry[],
  memory: string | null,
  archived: number,
  contexts: number,
  uiRun: string | null,
  watched: number,
];

/**
 * The lease and the turn's input. Checked in place: a z.tuple copied the history window,
 * the pending entries and each entry's fields on every acquire.
 */
export const acquireOk = z.custom<AcquireOkReply>(
  (v) =>
    Array.isArray(v) &&
    v.length === 13 &&
    v[0] === 'ok' &&
    typeof v[1] === 'number' &&
    isStrings(v[2]) &&
    isStringOrNull(v[3]) &&
    isStringOrNull(v[4]) &&
    isStrings(v[5]) &&
    typeof v[6] === 'number' &&
    Array.isArray(v[7]) &&
    v[7].every(isStreamEntry) &&
    isStringOrNull(v[8]) &&
    typeof v[9] === 'number' &&
    typeof v[10] === 'number' &&
    isStringOrNull(v[11]) &&
    typeof v[12] === 'number',
  { message: 'not an acquire.lua reply' },
);

/** A chat as the sweeper sees it: pending messages and the lease, judged by Redis's clock. */
export interface SweepState {
  pending: number;
  /** `free`: no owner; `live`: held, `leaseMs` left; `expired`: ran out `leaseMs` ago, never released. */
  lease: 'free' | 'live' | 'expired';
  leaseMs: number;
  /** The chat has a reply route and outbox items its delivery has not reached. */
  undelivered: boolean;
  /** Contact sends of this chat not yet written to their target (a crash in between). */
  relays: number;
}

export type FencedResult<T> =
  | ({ ok: true } & T)
  | { ok: false; reason: 'fenced-out' | 'missing' | 'missing-send'; detail: string };

export interface InboxEntry {
  streamId: string;
  message: ChatMessage;
}

export interface OutboxItem {
  id: string;
  text: string;
  ts: number;
  runId: string;
  /** Set when another chat's turn sent this (chat_contact_send): that chat's key. */
  from?: string;
  /**
   * chatlane's notice, not the model's words: `failure`, a message could not be processed;
   * `budget`, the chat is over its daily token budget (CHAT_DAILY_TOKEN_BUDGET).
   */
  notice?: 'failure' | 'budget';
  /** The W3C traceparent of the span that wrote it (tracing on): its delivery attempts join that trace. */
  traceparent?: string;
  /**
   * The chat_send's tool call id: the id of the reply stream text part that showed this text
   * as it was written (PLATFORM_STREAMING: delivery streams that part no more once it is delivered).
   */
  part?: string;
  /**
   * A tool approval request (docs/approvals.md), not a reply: a platform shows it as a card
   * with Approve and Deny buttons, a webhook receiver gets `approval.requested`. `text` is
   * the request in words, with how to answer in text.
   */
  approval?: OutboxApproval;
  /**
   * How many messages the item went out as, when its platform took it as several (2 or more;
   * absent otherwise, and until delivery passed it). Written when the last one went out.
   */
  parts?: number;
}

/** The request an approval card asks about (commit.lua writes it with the request). */
export const outboxApprovalSchema = z.object({
  id: z.string(),
  tool: z.string(),
  input: z.unknown(),
  expiresAt: z.number(),
  reason: z.string().optional(),
});
export type OutboxApproval = z.infer<typeof outboxApprovalSchema>;

export interface ChatEvent {
  id: string;
  type: string;
  ts: number;
  data: Record<string, unknown>;
}

export interface HistoryWindow {
  /** The first history message when it is a summary and lies outside the window. */
  summary: ChatMessage | undefined;
  messages: ChatMessage[];
  total: number;
}

export type StreamEntry = [id: string, fields: string[]];

const isReplyItem = (v: unknown) => typeof v === 'string' || typeof v === 'number';

/** reply-append-many.lua's reply: reply-write.lua's answer per reply. */
export const replyResultsSchema = z.custom<Array<'ok' | 'stop' | 'fenced-out'>>(
  (v) => Array.isArray(v) && v.every((r) => r === 'ok' || r === 'stop' || r === 'fenced-out'),
  { message: "not a reply-append-many reply ('ok', 'stop' or 'fenced-out' per reply)" },
);

/** renew-many.lua's reply: 1 or 0 per lease. */
export const renewedSchema = z.custom<number[]>(
  (v) => Array.isArray(v) && v.every((n) => n === 0 || n === 1),
  { message: 'not a renew-many reply (1 or 0 per lease)' },
);

/** One lease a worker renews (renew-many.lua). */
export interface LeaseRenewal {
  chatKey: string;
  owner: string;
  fence: string;
  leaseMs: number;
  runId: string;
}

/**
 * The reply of most store scripts: a status string, then strings and numbers. Checked in
 * place: a z.tuple of a union copied every reply and failed a string parse on every number.
 */
export const tuple = z.custom<[string, ...Array<string | number>]>(
  (v) => Array.isArray(v) && typeof v[0] === 'string' && v.every(isReplyItem),
  { message: 'not a script reply (a status string, then strings and numbers)' },
);

/** Sum of `metadata.tokens`: what a fenced append adds to the chat's token count. */
export function tokensOf(messages: ChatMessage[]): number {
  return messages.reduce((sum, m) => sum + (m.metadata?.tokens ?? 0), 0);
}

/** The refusal of a fenced append script (commit.lua, fail.lua): `missing` or `fenced-out`. */
export function fencedRefusal(raw: z.infer<typeof tuple>): FencedResult<never> {
  const reason = raw[0] === 'missing' || raw[0] === 'missing-send' ? raw[0] : 'fenced-out';
  return { ok: false, reason, detail: String(raw[1]) };
}

export function fieldsOf(fields: string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i]!, fields[i + 1]!);
  return map;
}

const outboxPageSchema = z.tuple([
  z.tuple([z.null(), z.array(z.tuple([z.string(), z.array(z.string())]))]),
  z.tuple([z.null(), z.record(z.string(), z.string())]),
]);

/**
 * A MULTI's [XRANGE of the outbox, HGETALL of its parts hash] as the page's items, each with
 * its part count when the hash has one. The hash, not HMGET of the page's ids: those are
 * known only once the range is read, and a read script converting the page to Lua and back
 * costs Redis several times the XRANGE (the hash holds at most OUTBOX_KEEP_ITEMS and a
 * quarter small fields, usually none).
 */
export function outboxPageOf(raw: unknown): OutboxItem[] {
  const [[, entries], [, counts]] = outboxPageSchema.parse(raw);
  return entries.map((entry) => {
    const item = outboxItemOf(entry);
    const parts = Number(counts[entry[0]] ?? Number.NaN);
    return Number.isInteger(parts) && parts >= 2 ? { ...item, parts } : item;
  });
}

/** One outbox stream entry as the API and the senders see it. */
export function outboxItemOf([id, fields]: StreamEntry): OutboxItem {
  const f = fieldsOf(fields);
  const from = f.get('from');
  const notice = f.get('notice');
  const traceparent = f.get('tp');
  const part = f.get('part');
  const approval = parseJsonAs(outboxApprovalSchema, f.get('approval'));
  return {
    id,
    text: f.get('text') ?? '',
    ts: Number(f.get('ts') ?? streamIdTime(id)),
    runId: f.get('runId') ?? '',
    ...(from !== undefined && { from }),
    ...((notice === 'failure' || notice === 'budget') && { notice }),
    ...(traceparent !== undefined && { traceparent }),
    ...(part !== undefined && { part }),
    ...(approval !== undefined && { approval }),
  };
}

/** One events stream entry as the API and the live stream show it. */
export function chatEventOf([id, fields]: StreamEntry): ChatEvent {
  const f = fieldsOf(fields);
  let data: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(f.get('data') ?? '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
      data = parsed as Record<string, unknown>;
  } catch {
    // An unreadable event payload is shown empty rather than failing the listing.
  }
  return { id, type: f.get('type') ?? 'unknown', ts: streamIdTime(id), data };
}

/** An unreadable record is skipped: it only costs a possible repeat, never the turn. */
export function parseUncommitted(raw: string | number): UncommittedSend[] {
  const send = parseJsonAs(uncommittedSendSchema, String(raw));
  return send ? [send] : [];
}

/** A turn's input from the raw reads of its history head and window, inbox and memory. */
export function turnInputOf(
  head: string | null,
  window: string[],
  counts: { histLen: number; archived: number; contexts: number },
  entries: StreamEntry[],
  memory: string | null,
): TurnInput {
  const total = counts.histLen;
  const messages = window.map(parseStoredMessage);
  let summary: ChatMessage | undefined;
  if (head && total > messages.length) {
    const first = parseStoredMessage(head);
    if (first.metadata.kind === 'summary') summary = first;
  }
  return {
    memory: memory ?? undefined,
    archived: counts.archived,
    contexts: counts.contexts,
    window: { summary, messages, total },
    pending: entries.map(([streamId, fields]) => ({
      streamId,
      message: parseStoredMessage(fieldsOf(fields).get('m') ?? ''),
    })),
  };
}

/** Stream ids are `ms-seq`; the millisecond part is the time Redis accepted the entry. */
export function streamIdTime(id: string): number {
  return Number(id.split('-')[0]);
}
