import type { ChatlaneApi } from './api.js';
import type { ChatState } from './chat-state.js';
import { BudgetExhaustedError } from './http.js';

/**
 * How the load tool learns that replies appeared and turns committed: polling each waiting
 * chat's outbox and events through the HTTP API (here), or the chat's live stream
 * (stream-watcher.ts). Either feeds `applyOutbox`/`applyEvents` of the chat and calls `notify()`.
 */
export interface ReplyWatcher {
  readonly name: string;
  /** The chat has acknowledged messages not yet known to be answered. */
  watch(chat: ChatState): void;
  /** Typical delay between a reply appearing and the watcher seeing it (for the report). */
  resolutionMs(): number;
  close(): Promise<void>;
}

export interface PollerOptions {
  intervalMs: number;
  concurrency: number;
  /** Events are read at least every this many polls of a chat even when its outbox is quiet. */
  eventsEvery?: number;
}

export interface PollerHooks {
  now(): number;
  /** A poll failed (the chat stays watched); counted by code in the report. */
  onError(code: string): void;
  /** The run cannot go on (request budget spent). */
  onFatal(err: Error): void;
}

const PAGE = 1000;

interface Watch {
  lastPolledAt: number;
  polls: number;
  sinceEvents: number;
  /** New outbox items were seen and no events read has shown the chat answered since. */
  needEvents: boolean;
}

/**
 * A bounded pool of pollers over a FIFO ring of the chats that wait for replies: each chat
 * is read at most once per `intervalMs`, at most `concurrency` requests are in flight, and
 * a chat leaves the ring as soon as its committed turns have consumed everything it was sent.
 */
export class OutboxPoller implements ReplyWatcher {
  readonly name = 'outbox-poll';
  private readonly ring: ChatState[] = [];
  private readonly watches = new Map<ChatState, Watch>();
  private wake: (() => void) | undefined;
  private stopped = false;
  private readonly loops: Promise<void>[];
  private gapSum = 0;
  private gapCount = 0;

  constructor(
    private readonly api: ChatlaneApi,
    private readonly opts: PollerOptions,
    private readonly hooks: PollerHooks,
  ) {
    this.loops = Array.from({ length: opts.concurrency }, () => this.loop());
  }

  watch(chat: ChatState): void {
    if (this.stopped || this.watches.has(chat)) return;
    this.watches.set(chat, { lastPolledAt: -Infinity, polls: 0, sinceEvents: 0, needEvents: false });
    this.ring.push(chat);
    this.wake?.();
  }

  /** The chat is in the ring (until it is answered). */
  watching(chat: ChatState): boolean {
    return this.watches.has(chat);
  }

  resolutionMs(): number {
    // A reply lands uniformly within the gap between two polls of its chat.
    return this.gapCount === 0 ? this.opts.intervalMs / 2 : this.gapSum / this.gapCount / 2;
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await Promise.all(this.loops);
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const chat = this.ring.shift();
      if (!chat) {
        await new Promise<void>((resolve) => {
          const prev = this.wake;
          this.wake = () => {
            this.wake = undefined;
            prev?.();
            resolve();
          };
        });
        continue;
      }
      const w = this.watches.get(chat)!;
      const wait = w.lastPolledAt + this.opts.intervalMs - this.hooks.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (this.stopped) return;
      try {
        await this.poll(chat, w);
      } catch (err) {
        if (err instanceof BudgetExhaustedError) {
          this.stopped = true;
          this.hooks.onFatal(err);
          return;
        }
        this.hooks.onError((err as { code?: string }).code ?? (err as Error).name ?? 'POLL_FAILED');
      }
      if (chat.answered) {
        this.watches.delete(chat);
        chat.notify();
      } else {
        this.ring.push(chat);
      }
    }
  }

  private async poll(chat: ChatState, w: Watch): Promise<void> {
    const now = this.hooks.now();
    if (w.polls > 0) {
      this.gapSum += now - w.lastPolledAt;
      this.gapCount++;
    }
    w.lastPolledAt = now;
    w.polls++;
    w.sinceEvents++;
    const before = chat.outbox.size;
    await this.readOutbox(chat);
    if (chat.outbox.size > before) w.needEvents = true;
    if (!w.needEvents && w.sinceEvents < (this.opts.eventsEvery ?? 5)) return;
    w.sinceEvents = 0;
    await this.readEvents(chat);
    if (chat.allConsumed) {
      w.needEvents = false;
      // A reply written between our outbox read and the commit would be missed otherwise.
      await this.readOutbox(chat);
    }
  }

  private async readOutbox(chat: ChatState): Promise<void> {
    for (;;) {
      const page = await this.api.outbox(chat.key, chat.outboxCursor, PAGE);
      chat.applyOutbox(page.items, this.hooks.now());
      if (page.items.length < PAGE) return;
    }
  }

  private async readEvents(chat: ChatState): Promise<void> {
    for (;;) {
      const page = await this.api.events(chat.key, chat.eventsCursor, PAGE);
      chat.applyEvents(page.items);
      if (page.items.length < PAGE) return;
    }
  }
}
