import type { Logger } from '../../../shared/logger.js';
import { assistantMessageId } from '../../../shared/messages.js';
import { isSendTextStart } from '../../../shared/store/reply-send-part.js';
import type {
  ReplyEvent,
  ReplyField,
  ReplyStreams,
  ReplyTail,
  ReplyWriteMode,
  ReplyWriteResult,
} from '../../../shared/store/reply-streams.js';
import type { UiChunk } from '../../agent/stream/ui-chunks.js';
import { FlushTick } from './flush-tick.js';
import { appendsOf } from './reply-appends.js';

type Entry = ['c', UiChunk] | ['m', string[]];

interface Batch {
  entries: Entry[];
  event?: ReplyEvent;
  close?: boolean;
  /** Holds a chunk a reader waits for (see `chunk`): the batch is for the first tick. */
  urgent?: boolean;
}

export interface ReplyWriterHooks {
  /** An operator or a person asked this turn to stop (meta.stop names its fence). */
  stop(): void;
  /** The fence is gone: another turn holds the chat. */
  fencedOut(): void;
  /**
   * PLATFORM_STREAMING: a chat_send's text part started (written, so a reader finds it), or
   * the reply closed. Delivery follows the one and clears up after the other.
   */
  platform?(): void;
}

const sendStart = ([field, value]: Entry): boolean => field === 'c' && isSendTextStart(value);

/** Entries as a script writes them: each value as JSON. */
const fieldsOf = (entries: readonly Entry[]): ReplyField[] => entries.map(([f, v]) => [f, JSON.stringify(v)]);

/**
 * Chunks that start no write of their own: a step's end shows nothing new, so it goes with
 * the next write (the next step's first chunk, or the close). A write less per step.
 */
const LAZY = new Set(['finish-step']);

const isEager = (batch: Batch): boolean =>
  batch.event !== undefined ||
  batch.close === true ||
  batch.entries.some(([field, value]) => field !== 'c' || !LAZY.has(value.type));

/**
 * How long chunks gather, at most, before one write, for what a reader waits to see: a
 * reply's start, a part's start and its first text, a tool's input or output, a part's end.
 */
const FLUSH_MS = 15;

/**
 * How long a text part's further deltas gather, at most: once a part shows text, it grows in
 * steps of about this. The model sends a chunk every few tens of ms, each small; written one
 * by one, each was a write of the worker (its share of a script call, promises, a socket
 * write at every tick), an XADD and an entry the ingresses read and send. A page can
 * throttle its own renders further (`useChat`'s `throttle`).
 */
const STEADY_MS = 100;

/** The ticks a writer joins: the first for what a reader waits for, the steady one for a part's further text. */
export interface ReplyTicks {
  first: FlushTick;
  steady: FlushTick;
}

/** The process's writers share these ticks, so the writes due at once go to Redis together. */
const TICKS: ReplyTicks = { first: new FlushTick(FLUSH_MS), steady: new FlushTick(STEADY_MS) };

/**
 * A turn's reply stream writer: chunks are gathered until the process's next flush tick (15
 * ms; a text part's further deltas, after its first, until the steady tick of 100 ms) and
 * written in one fenced script call (consecutive text deltas of one part joined into one
 * chunk; a plain append shares its call with the other writers' appends of that tick,
 * `reply-appends.ts`), one write in flight at a time, in order. The
 * stream is the live view only: a failed write is logged and the turn goes on (the outbox and
 * the history are the record).
 */
export class ReplyWriter {
  private readonly batches: Batch[] = [];
  private opened = false;
  private dead = false;
  private closed = false;
  /** `closing` took the rest for the commit: the drain stops after the write in flight. */
  private handingOff = false;
  /** The one write in flight: the writer's own, or an outbox write that took a hand-off. */
  private flushing: Promise<void> | undefined;
  /** The hand-off in flight: ends it (`handedOff`), and whether it carried a send's start. */
  private handed: { done: () => void; sendStart: boolean } | undefined;
  /** Text parts that have shown text: their further deltas wait for the steady tick. */
  private readonly texts = new Set<string>();

  /** Whether what waits unwritten is for the first tick: an urgent chunk, an event or the close. */
  private get dueFirst(): boolean {
    return this.batches.some((b) => b.urgent || b.event || b.close);
  }

  /** Every entry that waits unwritten, taken for one write. */
  private takeAll(): Entry[] {
    return this.batches.splice(0).flatMap((b) => b.entries);
  }

  constructor(
    private readonly replies: ReplyStreams,
    private readonly chatKey: string,
    private readonly fence: string,
    readonly runId: string,
    private readonly logger: Logger,
    private readonly hooks: ReplyWriterHooks,
    /** The run whose reply was left open when the lease was taken (the lease's read: no read here). */
    private readonly openReply: string | undefined,
    private readonly ticks: ReplyTicks = TICKS,
  ) {}

  /** The UI message id of this turn's reply: the id its first committed assistant message gets. */
  get messageId(): string {
    return assistantMessageId(this.runId);
  }

  /**
   * The reply starts: which messages it answers, then the `start` chunk (closing an earlier
   * turn's half reply). `continues`: the stored message this reply goes on with (a turn
   * resumed by an approval answer): a page adds the reply to that message, as `useChat` does.
   */
  open(messageIds: string[], continues?: string): void {
    if (this.opened || this.closed) return;
    this.opened = true;
    this.batches.push({
      entries: [
        ['m', messageIds],
        ['c', { type: 'start', messageId: continues ?? this.messageId }],
      ],
      event: { type: 'reply.started', data: { runId: this.runId, messageIds } },
    });
    void this.flush();
  }

  /** Messages merged into the running turn: what follows answers them too. */
  merged(messageIds: string[]): void {
    if (!this.opened || this.closed || messageIds.length === 0) return;
    this.batches.push({
      entries: [['m', messageIds]],
      event: { type: 'reply.merged', data: { runId: this.runId, messageIds } },
    });
    void this.flush();
  }

  chunk(chunk: UiChunk): void {
    if (!this.opened || this.closed || this.dead || this.handingOff) return;
    let batch = this.batches.at(-1);
    if (!batch || batch.event) {
      batch = { entries: [] };
      this.batches.push(batch);
    }
    const last = batch.entries.at(-1);
    if (
      chunk.type === 'text-delta' &&
      last?.[0] === 'c' &&
      last[1].type === 'text-delta' &&
      last[1].id === chunk.id
    ) {
      // The chunker hands each chunk over: the batch owns it and may grow it in place.
      last[1].delta = `${String(last[1].delta)}${String(chunk.delta)}`;
    } else {
      batch.entries.push(['c', chunk]);
    }
    if (LAZY.has(chunk.type)) return;
    // A part's first text is what a reader waits for; the rest of it only grows what is shown.
    if (chunk.type !== 'text-delta' || !this.texts.has(String(chunk.id))) {
      if (chunk.type === 'text-delta') this.texts.add(String(chunk.id));
      batch.urgent = true;
    }
    this.schedule();
  }

  /** The last chunks (`finish`, or `abort` when another turn will answer), written before this resolves. */
  async close(last: UiChunk[]): Promise<void> {
    if (!this.opened || this.closed) return;
    this.closed = true;
    const entries = last.map((c): Entry => ['c', c]);
    const pending = this.batches.at(-1);
    // What waits unwritten (a step's end) goes in the same write.
    if (pending && !pending.event) {
      pending.entries.push(...entries);
      pending.close = true;
    } else {
      this.batches.push({ entries, close: true });
    }
    this.unschedule();
    await this.flush();
    // A hand-off was in flight and wrote none of these: the drain that follows it does.
    while (this.flushing && !this.dead) await this.flushing;
  }

  /**
   * What waits unwritten, for a chat_send's outbox write to append in its own script
   * (outbox.lua): the send's text part, written with the item that names it, and a write less
   * a step. Undefined when it must go through the writer: nothing waits, a write is in flight
   * (its entries go first), or a merge's event or the close waits. `handedOff` says how the
   * write went.
   */
  handOff(): ReplyTail | undefined {
    if (!this.opened || this.closed || this.dead || this.handingOff || this.flushing) return undefined;
    if (this.batches.length === 0 || this.batches.some((b) => b.event || b.close)) return undefined;
    this.unschedule();
    const entries = this.takeAll();
    // The outbox write is this writer's write in flight: what gathers meanwhile follows it.
    void this.inFlight(
      new Promise<void>((resolve) => {
        this.handed = { done: resolve, sendStart: entries.some(sendStart) };
      }),
    );
    return this.replies.tail(this.chatKey, this.runId, fieldsOf(entries));
  }

  /** The outbox write that took `handOff`'s entries has ended: its result, as `drain` takes a write's. */
  handedOff(result: ReplyWriteResult | 'failed'): void {
    const handed = this.handed;
    this.handed = undefined;
    if (result === 'failed') {
      this.logger.warn('reply stream write failed with the outbox item; the live view misses these chunks');
    } else {
      this.wrote(result, handed?.sendStart === true);
    }
    handed?.done();
  }

  /**
   * The reply's last entries for the commit to write (commit.lua closes the stream in the same
   * script): whatever is not yet written, then `last`. A write in flight, and a merge's event,
   * go out first. Undefined when the commit has nothing to close (never opened, closed, or
   * fenced out). The writer takes no more chunks; `committed` says how the commit went.
   */
  async closing(last: UiChunk[]): Promise<ReplyTail | undefined> {
    if (!this.opened || this.closed || this.dead) return undefined;
    this.handingOff = true;
    this.unschedule();
    if (this.batches.some((b) => b.event)) {
      // A merge's event needs reply-write.lua: a merge at the very end writes as before.
      this.handingOff = false;
      while (!this.dead && (this.flushing || this.batches.length > 0)) await (this.flushing ?? this.flush());
      this.handingOff = true;
    } else if (this.flushing) {
      // The drain stops after its write in flight; what it had not taken is the commit's.
      await this.flushing;
    }
    if (this.dead) return undefined;
    const entries = this.takeAll();
    for (const chunk of last) entries.push(['c', chunk]);
    return this.replies.tail(this.chatKey, this.runId, fieldsOf(entries));
  }

  /**
   * The commit that took `closing`'s entries: written, the reply is closed; not written (fenced
   * out, or it failed), those entries are gone and `close` may still end the reply.
   */
  committed(written: boolean): void {
    this.handingOff = false;
    if (!written) return;
    this.closed = true;
    this.hooks.platform?.();
  }

  /**
   * Join the next tick: the first one when a reader waits for what is unwritten, else the
   * steady one (unless already on the first). A tick holds a writer once; a write in flight
   * schedules what follows it.
   */
  private schedule(): void {
    if (this.flushing) return;
    const { first, steady } = this.ticks;
    if (this.dueFirst) {
      steady.delete(this.onTick);
      first.add(this.onTick);
    } else if (!first.has(this.onTick)) {
      steady.add(this.onTick);
    }
  }

  private unschedule(): void {
    this.ticks.first.delete(this.onTick);
    this.ticks.steady.delete(this.onTick);
  }

  private readonly onTick = (): void => {
    void this.flush();
  };

  private flush(): Promise<void> {
    return this.flushing ?? this.inFlight(this.drain());
  }

  /** `write` is the write in flight: later ones wait for it, and what gathered meanwhile follows it. */
  private inFlight(write: Promise<void>): Promise<void> {
    this.flushing = write.finally(() => {
      this.flushing = undefined;
      if (this.batches.length > 0 && !this.dead && !this.handingOff) {
        if (this.closed) void this.flush();
        else if (this.batches.some(isEager)) this.schedule();
      }
    });
    return this.flushing;
  }

  /** A write's result: delivery follows a send's start (or the close), a stop or a lost fence ends the turn. */
  private wrote(result: ReplyWriteResult, platform: boolean): void {
    if (result !== 'fenced-out' && platform) this.hooks.platform?.();
    if (result === 'stop') this.hooks.stop();
    else if (result === 'fenced-out') {
      this.dead = true;
      this.batches.length = 0;
      this.hooks.fencedOut();
    }
  }

  private async drain(): Promise<void> {
    for (let n = 0; this.batches.length > 0 && !this.dead && !this.handingOff; n++) {
      // What gathered during a write: a part's further text waits for its tick (inFlight).
      if (n > 0 && !this.closed && !this.dueFirst) return;
      const batch = this.batches.shift()!;
      const mode: ReplyWriteMode =
        batch.event?.type === 'reply.started' ? 'open' : batch.close ? 'close' : 'append';
      const fields = fieldsOf(batch.entries);
      try {
        // A plain append joins the other writers' appends of this flush in one script call.
        const result =
          mode === 'append' && !batch.event
            ? await appendsOf(this.replies).append({
                chatKey: this.chatKey,
                fence: this.fence,
                runId: this.runId,
                fields,
              })
            : await this.replies.write(
                this.chatKey,
                this.fence,
                this.runId,
                mode,
                fields,
                batch.event,
                mode === 'open' ? (this.openReply ?? null) : undefined,
              );
        this.wrote(result, batch.close === true || batch.entries.some(sendStart));
      } catch (err) {
        this.logger.warn({ err }, 'reply stream write failed; the live view misses these chunks');
      }
    }
  }
}
