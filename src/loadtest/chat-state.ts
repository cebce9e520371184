import type { ChatEvent, OutboxItem } from './api.js';
import type { Delivery } from './webhook.js';

/**
 * What the load tool knows about each chat while it runs: its messages and their acks, and
 * what the deployment showed of it (outbox items with the time we first saw them, and the
 * events that tell progress). Times are milliseconds since the run started.
 */

export type MessageOutcome = 'unsent' | 'sending' | 'accepted' | 'duplicate' | 'failed';

export interface MessageRecord {
  chat: number;
  index: number;
  id: string;
  /** The id the deployment stored it under, once acknowledged (differs for webhooks). */
  storedId?: string;
  text: string;
  /** Open model: when the schedule wanted it sent. */
  dueAt?: number;
  /** Start of the first attempt. */
  sentAt?: number;
  ackAt?: number;
  /** Latency of the attempt that was acknowledged. */
  ackMs?: number;
  attempts: number;
  outcome: MessageOutcome;
  lastError?: string;
}

export interface SeenOutboxItem extends OutboxItem {
  seenAt: number;
}

export interface CommitEvent {
  runId: string;
  /** Redis time of the commit (the stream id's milliseconds, epoch ms). */
  ts: number;
  consumed: number;
  merged: number;
  /** How long the turn ran before its commit (worker clock). */
  ms: number | undefined;
  fence: string | undefined;
  worker: string | undefined;
  /** The turn's model tokens (its `calls`, or the totals an older deployment records). */
  tokens?: TurnTokens;
}

export interface TurnTokens {
  input: number;
  cachedInput: number;
  output: number;
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

/** A turn.committed event's tokens: summed over its `calls`, else its input/output totals. */
export function turnTokens(data: Record<string, unknown>): TurnTokens | undefined {
  if (Array.isArray(data.calls)) {
    const t: TurnTokens = { input: 0, cachedInput: 0, output: 0 };
    for (const call of data.calls as Array<Record<string, unknown>>) {
      t.input += num(call?.i);
      t.cachedInput += num(call?.c);
      t.output += num(call?.o);
    }
    return t;
  }
  if (typeof data.inputTokens !== 'number' && typeof data.outputTokens !== 'number') return undefined;
  return { input: num(data.inputTokens), cachedInput: 0, output: num(data.outputTokens) };
}

export interface TakeoverEvent {
  ts: number;
  previousOwner: string;
  owner: string;
}

export class ChatState {
  readonly messages: MessageRecord[] = [];
  /** Acknowledged messages in the order of their acknowledgements (= the chat's inbox order). */
  readonly ackedInOrder: MessageRecord[] = [];
  acked = 0;
  sendsInFlight = 0;
  /** Messages the deployment says its committed turns consumed (sum over turn.committed). */
  consumed = 0;
  /**
   * Stored ids the seen commits answered (their `messageIds`). The sum above counts a commit
   * a failover lost and the turn that answered the same messages again twice; these do not.
   */
  private readonly consumedIds = new Set<string>();
  /** Acknowledged stored ids no seen commit has answered yet. */
  private readonly unanswered = new Set<string>();
  /** A commit without `messageIds` was seen (an older deployment): only the sum can tell. */
  private countOnly = false;
  readonly commits: CommitEvent[] = [];
  readonly takeovers: TakeoverEvent[] = [];
  readonly eventCounts: Record<string, number> = {};
  readonly outbox = new Map<string, SeenOutboxItem>();
  /** Replies delivered to this process's receiver (webhook transport), by outbox item id. */
  readonly deliveries = new Map<string, Delivery>();
  /** Set when replies are delivered to us: a chat is answered only once each reply arrived. */
  expectDeliveries = false;
  outboxCursor: string | undefined;
  eventsCursor: string | undefined;
  firstSentAt: number | undefined;
  lastReplySeenAt: number | undefined;
  /** Set once the chat was answered while nothing was left to send. */
  doneAt: number | undefined;
  /** No more sends will come for this chat (schedule finished or cut). */
  sendingOver = false;
  private waiters: Array<() => void> = [];

  constructor(
    readonly index: number,
    readonly key: string,
  ) {}

  /**
   * Every acknowledged message has been consumed by a committed turn, no send is pending, and
   * (with deliveries expected) every reply seen in the outbox has been delivered.
   */
  get answered(): boolean {
    if (this.sendsInFlight > 0 || !this.allConsumed) return false;
    if (!this.expectDeliveries) return true;
    for (const id of this.outbox.keys()) if (!this.deliveries.has(id)) return false;
    return true;
  }

  /** Every acknowledged message has been answered by a commit seen so far. */
  get allConsumed(): boolean {
    return this.countOnly ? this.consumed >= this.acked : this.unanswered.size === 0;
  }

  /** A message was acknowledged under `storedId` (it may have been answered already: a retry). */
  noteAcked(rec: MessageRecord, storedId: string): void {
    this.acked++;
    this.ackedInOrder.push(rec);
    if (!this.consumedIds.has(storedId)) this.unanswered.add(storedId);
  }

  /** Resolves once `answered` holds (checked after every poll). */
  whenAnswered(): Promise<void> {
    if (this.answered) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  notify(): void {
    if (!this.answered || this.waiters.length === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Releases every waiter (the run is over, answered or not). */
  releaseAll(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /**
   * Items in outbox order, from a page or the stream; one already seen (a page read while
   * the chat changed watcher) is skipped, and the cursor never moves back.
   */
  applyOutbox(items: OutboxItem[], now: number): void {
    for (const item of items) {
      if (!this.outbox.has(item.id)) {
        this.outbox.set(item.id, { ...item, seenAt: now });
        this.lastReplySeenAt = now;
      }
      if (this.outboxCursor === undefined || streamIdAfter(item.id, this.outboxCursor))
        this.outboxCursor = item.id;
    }
  }

  /** Events in stream order; one at or before the cursor was counted already and is skipped. */
  applyEvents(events: ChatEvent[]): void {
    for (const e of events) {
      if (this.eventsCursor !== undefined && !streamIdAfter(e.id, this.eventsCursor)) continue;
      this.eventsCursor = e.id;
      this.eventCounts[e.type] = (this.eventCounts[e.type] ?? 0) + 1;
      if (e.type === 'turn.committed') {
        const d = e.data;
        const consumed = typeof d.consumed === 'number' ? d.consumed : 0;
        this.consumed += consumed;
        if (Array.isArray(d.messageIds)) {
          for (const id of d.messageIds) {
            if (typeof id !== 'string') continue;
            this.consumedIds.add(id);
            this.unanswered.delete(id);
          }
        } else this.countOnly = true;
        const tokens = turnTokens(d);
        this.commits.push({
          ...(tokens && { tokens }),
          runId: String(d.runId ?? ''),
          ts: e.ts,
          consumed,
          merged: typeof d.merged === 'number' ? d.merged : 0,
          ms: typeof d.ms === 'number' ? d.ms : undefined,
          fence: d.fence === undefined ? undefined : String(d.fence),
          worker: typeof d.worker === 'string' ? d.worker : undefined,
        });
      } else if (e.type === 'lease.takeover') {
        this.takeovers.push({
          ts: e.ts,
          previousOwner: String(e.data.previousOwner ?? ''),
          owner: String(e.data.owner ?? ''),
        });
      }
    }
  }
}

/** Redis stream ids (`<ms>-<seq>`) in order; an id that is not one sorts first. */
export function streamIdAfter(a: string, b: string): boolean {
  const [am, as] = a.split('-');
  const [bm, bs] = b.split('-');
  try {
    const [x, y, u, v] = [BigInt(am ?? ''), BigInt(as ?? ''), BigInt(bm ?? ''), BigInt(bs ?? '')];
    return x !== u ? x > u : y > v;
  } catch {
    return false;
  }
}
