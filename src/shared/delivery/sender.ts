import type { OutboxItem } from '../store/chat-store.js';
import type { ReplyPart, SplitReply } from './render/format.js';
import type { ReplyRoute } from './route.js';

/**
 * The delivery side's plug-in point: one `Sender` per channel (`route.channel`), looked up in
 * a `SenderRegistry` by the delivery worker. Senders live under `src/shared` so ingress-side
 * code (a platform's webhook module building its Chat SDK adapter) and worker-side code can
 * both construct and register them.
 *
 * Contract for `send`:
 * - It posts exactly one outbox item to the conversation `route` names; with `split`, one
 *   part of one (`request.part`): an item split into parts is sent part by part, each
 *   accepted part recorded before the next (see deliver.ts).
 * - It must not throw: a throw is treated as `retry` (a transient failure) and logged.
 * - It must honour `signal` (aborted after DELIVERY_TIMEOUT_MS): a send still running then is
 *   treated as `retry`, and the delivery lease it runs under is long enough for any send that
 *   honours the signal to end before another worker may take the chat over.
 * - `ok` means the receiver accepted the item: only then does the chat's delivery cursor move.
 *   Delivery is at-least-once: after a crash between acceptance and the cursor write the same
 *   item is sent again. A sender that gives the receiver an id to dedupe on gives
 *   `deliveryId(chatKey, item.id)` (delivery-id.ts): `item.id` alone repeats across chats.
 * - `retry` = try this item again later (5xx, network error, timeout, rate limit). `afterMs`,
 *   when the receiver said how long to wait (HTTP 429 `Retry-After`, Telegram `retry_after`),
 *   replaces the exponential backoff for this attempt.
 * - `failed` = retrying cannot help (403 bot blocked, 400 chat not found, 410 gone): the item
 *   is skipped, a `delivery.failed` event is recorded and the chat's later items go on.
 * Every non-`ok` attempt counts toward DELIVERY_MAX_ATTEMPTS; the last one fails the item.
 */
export interface Sender {
  /** The `route.channel` this sender serves. */
  readonly channel: string;
  send(request: SendRequest): Promise<SendResult>;
  /**
   * Optional: the item as the messages its receiver gets, in order (a chat platform's limit
   * and dialect, src/shared/delivery/render). Without it an item is one message. `format`
   * (a partly delivered item's, from its part cursor) asks for the split it began with; a
   * sender that no longer has that format answers with its current one. Must not throw: a
   * result that is not a split is the item's answer for this attempt (`retry`: the platform
   * runtime is not up yet).
   */
  split?(request: SplitRequest): Promise<SplitReply | Exclude<SendResult, { status: 'ok' }>>;
  /**
   * Optional: show "typing" in the conversation `threadId` (a chat platform thread) for a few
   * seconds; called every few seconds while a turn of the chat runs. Must not throw.
   */
  typing?(threadId: string): Promise<void>;
  /** Release connections (called once when the delivery worker closes). */
  close?(): Promise<void>;
}

/**
 * A sender that can show a reply as it is written (PLATFORM_STREAMING): a post fed by the
 * text as it grows, then edits or removal of that post. Each answers like `send` (never
 * throws; `retry` with `afterMs` on a rate limit) and honours `signal`.
 */
export interface StreamingSender extends Sender {
  /** Posts `texts` as they come; `ok` carries the platform's id of the message holding them. */
  streamPost(
    threadId: string,
    texts: AsyncIterable<string>,
    signal: AbortSignal,
  ): Promise<SendResult & { messageId?: string }>;
  /** Replaces the text of a message this bot posted. */
  editPost(threadId: string, messageId: string, part: ReplyPart, signal: AbortSignal): Promise<SendResult>;
  /** Removes a message this bot posted. */
  deletePost(threadId: string, messageId: string, signal: AbortSignal): Promise<SendResult>;
}

export function canStream(sender: Sender | undefined): sender is StreamingSender {
  return sender !== undefined && 'streamPost' in sender && 'editPost' in sender && 'deletePost' in sender;
}

export interface SendRequest {
  chatKey: string;
  route: ReplyRoute;
  item: OutboxItem;
  /** 1 for the first try of this item (of this part of it), 2 for the first retry, ... */
  attempt: number;
  signal: AbortSignal;
  /** With `split`: the one message of the item this send posts, and where it stands. */
  part?: { index: number; count: number; reply: ReplyPart };
}

export interface SplitRequest {
  chatKey: string;
  route: ReplyRoute;
  item: OutboxItem;
  format?: string;
}

export type SendResult =
  | { status: 'ok' }
  | { status: 'retry'; reason: string; afterMs?: number }
  | { status: 'failed'; reason: string };

export class SenderRegistry {
  private readonly senders = new Map<string, Sender>();
  private readonly closers: Array<() => Promise<void>> = [];

  constructor(senders: Iterable<Sender> = []) {
    for (const sender of senders) this.register(sender);
  }

  /** One sender per channel: registering a channel twice is a programming error. */
  register(sender: Sender): this {
    if (this.senders.has(sender.channel)) {
      throw new Error(`a sender for channel '${sender.channel}' is already registered`);
    }
    this.senders.set(sender.channel, sender);
    return this;
  }

  get(channel: string): Sender | undefined {
    return this.senders.get(channel);
  }

  channels(): string[] {
    return [...this.senders.keys()];
  }

  /** Something several senders share (a platform runtime): closed after every sender. */
  onClose(close: () => Promise<void>): this {
    this.closers.push(close);
    return this;
  }

  /** Close every sender once, then what they share; never throws. */
  async close(): Promise<void> {
    const all = [...this.senders.values()];
    this.senders.clear();
    await Promise.allSettled(all.map((s) => s.close?.()));
    await Promise.allSettled(this.closers.splice(0).map((c) => c()));
  }
}
