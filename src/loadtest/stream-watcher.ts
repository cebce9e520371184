import type { Readable } from 'node:stream';
import { eventSchema, outboxItemSchema } from './api.js';
import type { ChatState } from './chat-state.js';
import { BudgetExhaustedError, type HttpClient } from './http.js';
import type { OutboxPoller, PollerHooks, ReplyWatcher } from './replies.js';
import { type SseMessage, SseParser } from './sse.js';

/**
 * Replies through each chat's live stream (`GET /v1/chats/:chatKey/stream`, Server-Sent
 * Events): a reply is seen when the deployment pushes it, not at the next poll. One stream
 * per chat that is waiting for replies, opened from the chat's cursors (`0-0` for a fresh
 * chat: everything its streams hold, so a reply written before the stream opened is not
 * missed) and resumed with `Last-Event-ID` when the connection drops.
 *
 * The outbox poller stays the fallback, never beside a stream for the same chat: a chat goes
 * to it when `maxStreams` are open, or for good when its stream is refused (4xx, 503 at
 * capacity) or keeps failing.
 */

export interface StreamWatcherOptions {
  /** Streams open at once at most; chats beyond are polled. */
  maxStreams: number;
  /** How often streams of chats that are answered with nothing left to send are closed. */
  sweepMs?: number;
}

interface Tail {
  controller: AbortController;
  /** The SSE id of the last message: where a reconnect resumes. */
  cursor: string;
  /** Consecutive failed or short-lived connections. */
  failures: number;
  done: Promise<void>;
}

const MAX_FAILURES = 3;
const RETRY_MS = 200;
/** A connection that lived this long was a working stream: its failure count starts over. */
const HEALTHY_MS = 1000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export class StreamWatcher implements ReplyWatcher {
  private readonly tails = new Map<ChatState, Tail>();
  /** Chats whose stream failed for good: the poller serves them from then on. */
  private readonly polled = new Set<ChatState>();
  /** Every chat the poller served at some point (at capacity or after a failure). */
  private readonly everPolled = new Set<ChatState>();
  private readonly sweeper: NodeJS.Timeout;
  private stopped = false;
  readonly stats = { opened: 0, reconnects: 0 };

  constructor(
    private readonly http: HttpClient,
    private readonly poller: OutboxPoller,
    private readonly opts: StreamWatcherOptions,
    private readonly hooks: PollerHooks,
  ) {
    this.sweeper = setInterval(() => this.sweep(), opts.sweepMs ?? 250);
    this.sweeper.unref();
  }

  get name(): string {
    return this.everPolled.size > 0 ? 'sse-stream + outbox-poll' : 'sse-stream';
  }

  /** Chats the poller served (stream refused, failing, or over `maxStreams`). */
  get chatsPolled(): number {
    return this.everPolled.size;
  }

  watch(chat: ChatState): void {
    if (this.stopped || this.tails.has(chat)) return;
    if (this.polled.has(chat) || this.poller.watching(chat) || this.tails.size >= this.opts.maxStreams) {
      this.everPolled.add(chat);
      this.poller.watch(chat);
      return;
    }
    const tail: Tail = {
      controller: new AbortController(),
      cursor: `${chat.outboxCursor ?? '0-0'}.${chat.eventsCursor ?? '0-0'}`,
      failures: 0,
      done: Promise.resolve(),
    };
    this.tails.set(chat, tail);
    tail.done = this.follow(chat, tail);
  }

  resolutionMs(): number {
    // Streamed replies are seen as the deployment pushes them; polled ones within a poll gap.
    return this.everPolled.size > 0 ? this.poller.resolutionMs() : 0;
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweeper);
    const tails = [...this.tails.values()];
    this.tails.clear();
    for (const tail of tails) tail.controller.abort();
    await Promise.all(tails.map((t) => t.done));
    await this.poller.close();
  }

  /** Frees the streams of chats that are done (answered, nothing left to send). */
  private sweep(): void {
    for (const [chat, tail] of this.tails) {
      if (chat.sendingOver && chat.answered) {
        this.tails.delete(chat);
        tail.controller.abort();
      }
    }
  }

  private async follow(chat: ChatState, tail: Tail): Promise<void> {
    const path = `/v1/chats/${encodeURIComponent(chat.key)}/stream`;
    const { signal } = tail.controller;
    while (!this.stopped && !signal.aborted) {
      let res: Awaited<ReturnType<HttpClient['openStream']>>;
      try {
        res = await this.http.openStream(path, { 'last-event-id': tail.cursor }, signal);
      } catch (err) {
        if (!(err instanceof BudgetExhaustedError)) throw err;
        this.tails.delete(chat);
        this.stopped = true;
        this.hooks.onFatal(err);
        return;
      }
      if (signal.aborted) {
        if (res.ok) res.body.destroy();
        return;
      }
      if (!res.ok) {
        this.hooks.onError(res.code);
        tail.failures++;
        // A refusal (4xx; 503 at capacity or without Redis) is not worth a reconnect loop.
        const refused =
          res.status !== undefined && ((res.status >= 400 && res.status < 500) || res.status === 503);
        if (refused || tail.failures >= MAX_FAILURES) return this.fallBack(chat);
        await sleep(RETRY_MS * tail.failures);
        continue;
      }
      this.stats.opened++;
      const openedAt = this.hooks.now();
      const broke = await this.read(chat, tail, res.body);
      if (signal.aborted || this.stopped) return;
      // The server ended the stream (shutdown, a slow reader) or the connection broke: resume.
      if (broke) this.hooks.onError(broke);
      this.stats.reconnects++;
      tail.failures = this.hooks.now() - openedAt >= HEALTHY_MS ? 0 : tail.failures + 1;
      if (tail.failures >= MAX_FAILURES) return this.fallBack(chat);
    }
  }

  /** Reads until the stream ends: undefined when it ended cleanly (or was aborted), else the error code. */
  private async read(chat: ChatState, tail: Tail, body: Readable): Promise<string | undefined> {
    const parser = new SseParser();
    // undici's body yields Buffers whatever the encoding; a character may span two chunks.
    const decoder = new TextDecoder();
    try {
      for await (const chunk of body) {
        const text = decoder.decode(chunk as Buffer, { stream: true });
        for (const message of parser.push(text)) this.apply(chat, tail, message);
        if (chat.answered) chat.notify();
      }
      return undefined;
    } catch (err) {
      if (tail.controller.signal.aborted) return undefined;
      const e = err as { code?: string; name?: string };
      return e.code ?? (e.name && e.name !== 'Error' ? e.name : 'STREAM_BROKEN');
    }
  }

  private apply(chat: ChatState, tail: Tail, message: SseMessage): void {
    if (message.event === 'outbox') {
      const item = outboxItemSchema.safeParse(parseJson(message.data));
      if (item.success) chat.applyOutbox([item.data], this.hooks.now());
      else this.hooks.onError('UNEXPECTED_STREAM_DATA');
    } else if (message.event === 'event') {
      const event = eventSchema.safeParse(parseJson(message.data));
      if (event.success) chat.applyEvents([event.data]);
      else this.hooks.onError('UNEXPECTED_STREAM_DATA');
    }
    // Every message carries the position after it (the ready event the starting one).
    if (message.id !== undefined) tail.cursor = message.id;
  }

  private fallBack(chat: ChatState): void {
    this.tails.delete(chat);
    this.polled.add(chat);
    this.everPolled.add(chat);
    if (!this.stopped) this.poller.watch(chat);
  }
}

/**
 * Whether the deployment serves live streams: opens one on a chat of this run that is never
 * written to and closes it again at once. Never throws but for the budget.
 */
export async function streamAvailable(
  http: HttpClient,
  chatKey: string,
): Promise<{ ok: true } | { ok: false; reason: string }> {
  const controller = new AbortController();
  const res = await http.openStream(`/v1/chats/${encodeURIComponent(chatKey)}/stream`, {}, controller.signal);
  if (res.ok) {
    res.body.destroy();
    controller.abort();
    return { ok: true };
  }
  return { ok: false, reason: `${res.status ?? 'no answer'} ${res.code}: ${res.message}` };
}
