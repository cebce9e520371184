import type { ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import type { RedisClient } from '../../shared/redis.js';
import { formatCursor, type StreamCursor } from './cursor.js';
import { StreamHub, type Subscription } from './hub.js';
import { type StreamView, sseMessage } from './sse.js';

export interface StreamSettings {
  /** A comment line to every client this often, so proxies and clients see a live connection. */
  heartbeatMs: number;
  /** Streams one ingress process serves at once; more are refused with 503 STREAM_CAPACITY. */
  maxClients: number;
  /**
   * Streams of one chat one ingress process serves at once (live streams, `/v1/ui` replies and
   * resumes together); more are refused with 429 STREAM_LIMIT, so one browser token cannot
   * take the process's whole capacity.
   */
  maxClientsPerChat: number;
  /** A client that lets this much pile up unread is dropped (it resumes with Last-Event-ID). */
  maxBufferBytes: number;
  /** Single Redis: longest blocking read. Cluster: interval between reads of a busy / a quiet chat. */
  blockMs?: number;
  pollMs?: number;
  pollMaxMs?: number;
}

export const STREAM_DEFAULTS: StreamSettings = {
  heartbeatMs: 15_000,
  maxClients: 10_000,
  maxClientsPerChat: 10,
  maxBufferBytes: 1024 * 1024,
};

/** A stream's place in the process's and its chat's counts until `release` (idempotent). */
export interface StreamSlot {
  readonly chatKey: string;
  release(): void;
}

/** Which cap refused a stream: the process's (SSE_MAX_CLIENTS) or its chat's (SSE_MAX_CLIENTS_PER_CHAT). */
export type StreamLimit = 'process' | 'chat';

/** One client's stream: messages wait in `pending` until the response is attached. */
export class OpenStream {
  private res: ServerResponse | undefined;
  private pending: string[] = [];
  private closed = false;
  subscription: Subscription | undefined;

  constructor(
    private readonly owner: StreamClients,
    private readonly slot: StreamSlot,
    private readonly start: () => StreamCursor,
  ) {}

  get chatKey(): string {
    return this.slot.chatKey;
  }

  /** Headers are written by the caller; this sends the preamble and anything already due. */
  attach(res: ServerResponse): void {
    if (this.closed) {
      res.end();
      return;
    }
    this.res = res;
    const cursor = this.start();
    res.write(
      `retry: 2000\nid: ${formatCursor(cursor)}\nevent: ready\ndata: ${JSON.stringify({ chatKey: this.chatKey, cursor: formatCursor(cursor) })}\n\n`,
    );
    const due = this.pending;
    this.pending = [];
    for (const text of due) this.write(text);
  }

  write(text: string): void {
    if (this.closed) return;
    if (!this.res) {
      this.pending.push(text);
      return;
    }
    this.res.write(text);
    if (this.res.writableLength > this.owner.settings.maxBufferBytes) {
      // A reader this far behind is dropped rather than buffered without bound.
      this.owner.logger.warn({ chatKey: this.chatKey }, 'stream client too slow; disconnected');
      this.res.destroy();
      this.close();
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.subscription?.close();
    this.pending = [];
    const res = this.res;
    // The socket goes with the stream: left half-open it would hold up the server's close.
    if (res && !res.writableEnded) res.end(() => res.socket?.destroy());
    else res?.socket?.destroy();
    this.owner.forget(this);
    this.slot.release();
  }
}

/**
 * The SSE clients of one ingress process and the hub they share. The hub (and its reader
 * connection) is created on the first stream; `close()` ends every stream and stops it.
 */
export class StreamClients {
  private readonly streams = new Set<OpenStream>();
  /** Other open responses fed by the hub (`/v1/ui`): ended with the streams. */
  private readonly others = new Set<{ close(): void }>();
  /** Slots taken, in all and by chat: what the two caps count. */
  private taken = 0;
  private readonly byChat = new Map<string, number>();
  private hub: StreamHub | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly createReader: () => RedisClient,
    private readonly prefix: string,
    readonly logger: Logger,
    readonly settings: StreamSettings,
    private readonly metrics?: Metrics,
  ) {
    metrics?.sseMaxClients.set(settings.maxClients);
    metrics?.sseMaxClientsPerChat.set(settings.maxClientsPerChat);
  }

  /** Open streamed responses of every kind (the slots taken). */
  get size(): number {
    return this.taken;
  }

  /** Open streamed responses of one chat. */
  sizeOf(chatKey: string): number {
    return this.byChat.get(chatKey) ?? 0;
  }

  /**
   * Take a slot for a new streamed response of `chatKey` (every kind counts), or say which cap
   * refuses it: checked and taken in one step, before anything opens, so requests racing for
   * the last slot cannot all pass. A closing process is full.
   */
  reserve(chatKey: string): StreamSlot | StreamLimit {
    const limit: StreamLimit | undefined =
      this.closed || this.taken >= this.settings.maxClients
        ? 'process'
        : this.sizeOf(chatKey) >= this.settings.maxClientsPerChat
          ? 'chat'
          : undefined;
    if (limit) {
      this.metrics?.sseRefused.inc({ limit });
      return limit;
    }
    this.taken += 1;
    this.byChat.set(chatKey, this.sizeOf(chatKey) + 1);
    let released = false;
    return {
      chatKey,
      release: () => {
        if (released) return;
        released = true;
        this.taken -= 1;
        const left = this.sizeOf(chatKey) - 1;
        if (left > 0) this.byChat.set(chatKey, left);
        else this.byChat.delete(chatKey);
      },
    };
  }

  /** End an open response of another kind with the streams (`close()`) until the returned function is called. */
  adopt(response: { close(): void }): () => void {
    this.others.add(response);
    return () => this.others.delete(response);
  }

  /** The hub (created on first use): `/v1/ui` follows reply streams and chat events through it. */
  get sharedHub(): StreamHub {
    if (this.closed) throw new Error('stream clients closed');
    this.hub ??= new StreamHub({
      redis: this.redis,
      createReader: this.createReader,
      prefix: this.prefix,
      logger: this.logger,
      ...(this.settings.blockMs !== undefined && { blockMs: this.settings.blockMs }),
      ...(this.settings.pollMs !== undefined && { pollMs: this.settings.pollMs }),
      ...(this.settings.pollMaxMs !== undefined && { pollMaxMs: this.settings.pollMaxMs }),
    });
    return this.hub;
  }

  /** Open a live stream in a slot `reserve` gave; the stream releases it when it closes. */
  async open(
    slot: StreamSlot,
    from: StreamCursor | undefined,
    view: StreamView = 'api',
  ): Promise<OpenStream> {
    const { chatKey } = slot;
    let hub: StreamHub;
    try {
      hub = this.sharedHub;
    } catch (err) {
      slot.release();
      throw err;
    }
    let startCursor: StreamCursor | undefined = from;
    const stream = new OpenStream(this, slot, () => startCursor ?? { outbox: '0-0', events: '0-0' });
    this.streams.add(stream);
    this.metrics?.sseClients.set(this.streams.size);
    try {
      stream.subscription = await hub.subscribe(chatKey, from, (item, cursor) =>
        stream.write(sseMessage(item, cursor, view)),
      );
    } catch (err) {
      stream.close();
      throw err;
    }
    startCursor ??= stream.subscription.cursor;
    this.startHeartbeat();
    return stream;
  }

  forget(stream: OpenStream): void {
    this.streams.delete(stream);
    this.metrics?.sseClients.set(this.streams.size);
  }

  private startHeartbeat(): void {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => {
      for (const stream of this.streams) stream.write(': heartbeat\n\n');
    }, this.settings.heartbeatMs);
    this.heartbeat.unref();
  }

  /** End every stream (clients reconnect elsewhere with Last-Event-ID) and stop reading. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    for (const stream of [...this.streams]) stream.close();
    for (const other of [...this.others]) other.close();
    await this.hub?.close();
  }
}
