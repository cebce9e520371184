import { Cluster } from 'ioredis';
import { lazyChatKeys } from '../../shared/keys.js';
import type { Logger } from '../../shared/logger.js';
import { type RedisClient, refreshSlotsOnRedirect } from '../../shared/redis.js';
import type { StreamEntry } from '../../shared/store/chat-store.js';
import { compareStreamIds, rangeStartAfter } from '../../shared/stream-id.js';
import type { StreamCursor, StreamName } from './cursor.js';
import { KeyTails, type TailSink } from './tails.js';

/**
 * Live tails of chats' outbox and events streams for every SSE client of one ingress
 * process, from Redis (so any ingress serves any chat, whoever took the message).
 *
 * No polling per client: the hub keeps one entry per watched chat (not per client) and
 * reads all of them together, then fans each new entry out to that chat's clients.
 * - Single Redis: one dedicated connection blocks in `XREAD BLOCK` over both streams of
 *   every watched chat. A newly watched chat wakes it (`CLIENT UNBLOCK` from the command
 *   connection) so the next read includes it.
 * - Redis Cluster: a multi-key command must stay in one hash slot, and every chat has its
 *   own slot, so one blocking read cannot cover several chats (and a blocked connection per
 *   chat would not scale). The hub then polls: one non-blocking XREAD per watched chat, all
 *   in flight at once (ioredis pipelines them per node), every `pollMs` for a chat that just
 *   had news and backing off (doubling) to `pollMaxMs` while it stays quiet. The cost is one
 *   cheap command per watched chat per interval, whatever the number of clients.
 *
 * Each client has its own cursor; an entry goes to a client only when it is newer than the
 * client's cursor, so a client resuming from `Last-Event-ID` reads its backlog first (while
 * live entries for it are held back) and never sees an entry twice or out of order.
 */

export interface HubEntry {
  stream: StreamName;
  entry: StreamEntry;
}

/** Receives the entries for one client, oldest first, with its cursor after each one. */
export type Sink = (item: HubEntry, cursor: StreamCursor) => void;

export interface HubOptions {
  /** Commands (XRANGE, CLIENT UNBLOCK); the hub never blocks on it. */
  redis: RedisClient;
  /** A connection of the hub's own for blocking reads (single Redis only); closed by `close()`. */
  createReader: () => RedisClient;
  prefix: string;
  logger: Logger;
  /** Longest a blocking read waits before it is re-issued (single Redis). */
  blockMs?: number;
  /** Cluster: interval between reads of a chat with news ... */
  pollMs?: number;
  /** ... and of a quiet one. */
  pollMaxMs?: number;
}

interface Client {
  cursor: StreamCursor;
  /** Entries held back while the client's backlog is read. */
  held: HubEntry[] | undefined;
  sink: Sink;
}

interface Channel {
  keys: Record<StreamName, string>;
  /** The newest entry the hub has read (or the stream's last entry when watching began). */
  cursor: StreamCursor;
  clients: Set<Client>;
  ready: Promise<void>;
  /** Cluster polling: the chat's current interval and when it is read next. */
  pollEvery: number;
  pollAt: number;
}

const READ_COUNT = 200;
/** A missed UNBLOCK (sent before its read was blocked) is repeated this often, this many times. */
const UNBLOCK_RETRY_MS = 5;
const UNBLOCK_TRIES = 40;

/** The millisecond part of a stream id. */
function msOf(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}
const PAGE = 500;
const STREAMS: readonly StreamName[] = ['outbox', 'events'];

export interface Subscription {
  /** Where the client started: its cursor after the backlog (or now, without one). */
  cursor: StreamCursor;
  close(): void;
}

export class StreamHub {
  private readonly channels = new Map<string, Channel>();
  private readonly byKey = new Map<string, { chatKey: string; stream: StreamName }>();
  private reader: RedisClient | undefined;
  /** The reader connection's CLIENT ID, learnt before its first blocking read on each connection. */
  private readerId: number | undefined;
  /** Bumped by every blocking read the reader issues; `reading` while one is outstanding. */
  private readSeq = 0;
  private reading = false;
  private loop: Promise<void> | undefined;
  private closed = false;
  private wake: (() => void) | undefined;
  private readonly blockMs: number;
  private readonly pollMs: number;
  private readonly pollMaxMs: number;
  private readonly cluster: boolean;
  /** Single streams followed by key (reply streams), read beside the chats' streams. */
  private readonly tails: KeyTails;

  constructor(private readonly opts: HubOptions) {
    this.blockMs = opts.blockMs ?? 5000;
    this.pollMs = opts.pollMs ?? 250;
    this.pollMaxMs = Math.max(this.pollMs, opts.pollMaxMs ?? 1000);
    this.cluster = opts.redis instanceof Cluster;
    this.tails = new KeyTails(
      opts.redis,
      () => {
        this.start();
        this.interrupt();
      },
      this.pollMs,
    );
  }

  /**
   * Follow one stream by key for one client: the entries after `from` first ('0-0': all it
   * holds), then live. Resolves with the function that ends the client's follow.
   */
  followKey(key: string, from: string, sink: TailSink): Promise<() => void> {
    if (this.closed) return Promise.reject(new Error('stream hub closed'));
    return this.tails.follow(key, from, sink);
  }

  get clientCount(): number {
    let n = 0;
    for (const c of this.channels.values()) n += c.clients.size;
    return n;
  }

  get chatCount(): number {
    return this.channels.size;
  }

  /**
   * Follow a chat for one client. With `from`, the entries after it are delivered first
   * (all that the streams still hold); without, only what comes next. Entries reach `sink`
   * in order; `sink` must not throw.
   */
  async subscribe(chatKey: string, from: StreamCursor | undefined, sink: Sink): Promise<Subscription> {
    if (this.closed) throw new Error('stream hub closed');
    const channel = this.watch(chatKey);
    const client: Client = { cursor: { outbox: '0-0', events: '0-0' }, held: [], sink };
    channel.clients.add(client);
    const close = () => {
      channel.clients.delete(client);
      if (channel.clients.size === 0 && this.channels.get(chatKey) === channel)
        this.unwatch(chatKey, channel);
    };
    try {
      await channel.ready;
      if (from) {
        client.cursor = { ...from };
        await this.backlog(channel, client);
      } else {
        client.cursor = { ...channel.cursor };
      }
    } catch (err) {
      close();
      throw err;
    }
    const held = client.held ?? [];
    client.held = undefined;
    for (const item of held) this.deliver(client, item);
    return { cursor: { ...client.cursor }, close };
  }

  private watch(chatKey: string): Channel {
    const existing = this.channels.get(chatKey);
    if (existing) return existing;
    const k = lazyChatKeys(this.opts.prefix, chatKey);
    const channel: Channel = {
      keys: { outbox: k.outbox, events: k.events },
      cursor: { outbox: '0-0', events: '0-0' },
      clients: new Set(),
      ready: Promise.resolve(),
      pollEvery: this.pollMs,
      pollAt: 0,
    };
    channel.ready = (async () => {
      // Watching starts at each stream's last entry: what comes after it is live.
      const [outbox, events] = await Promise.all(
        STREAMS.map((s) => this.opts.redis.xrevrange(channel.keys[s], '+', '-', 'COUNT', 1)),
      );
      channel.cursor = { outbox: outbox?.[0]?.[0] ?? '0-0', events: events?.[0]?.[0] ?? '0-0' };
      for (const s of STREAMS) this.byKey.set(channel.keys[s], { chatKey, stream: s });
      this.start();
      this.interrupt();
    })();
    channel.ready.catch(() => {
      if (this.channels.get(chatKey) === channel) this.unwatch(chatKey, channel);
    });
    this.channels.set(chatKey, channel);
    return channel;
  }

  private unwatch(chatKey: string, channel: Channel): void {
    this.channels.delete(chatKey);
    for (const s of STREAMS) this.byKey.delete(channel.keys[s]);
  }

  /** Everything after the client's cursor that the streams still hold, page by page. */
  private async backlog(channel: Channel, client: Client): Promise<void> {
    const items: HubEntry[] = [];
    for (const stream of STREAMS) {
      let after = client.cursor[stream];
      for (;;) {
        const start = rangeStartAfter(after);
        if (start === undefined) break;
        const page = (await this.opts.redis.xrange(
          channel.keys[stream],
          start,
          '+',
          'COUNT',
          PAGE,
        )) as StreamEntry[];
        for (const entry of page) items.push({ stream, entry });
        if (page.length < PAGE) break;
        after = page.at(-1)![0];
      }
    }
    // One timeline across both streams, by Redis time. Within one millisecond the two streams'
    // sequence numbers say nothing about each other: ties keep outbox before events.
    items.sort((a, b) => msOf(a.entry[0]) - msOf(b.entry[0]));
    for (const item of items) this.deliver(client, item);
  }

  private deliver(client: Client, item: HubEntry): void {
    const id = item.entry[0];
    if (compareStreamIds(id, client.cursor[item.stream]) <= 0) return;
    client.cursor = { ...client.cursor, [item.stream]: id };
    client.sink(item, client.cursor);
  }

  private dispatch(key: string, entries: StreamEntry[]): void {
    if (this.tails.dispatch(key, entries)) return;
    const where = this.byKey.get(key);
    const channel = where && this.channels.get(where.chatKey);
    if (!where || !channel) return;
    for (const entry of entries) {
      if (compareStreamIds(entry[0], channel.cursor[where.stream]) <= 0) continue;
      channel.cursor = { ...channel.cursor, [where.stream]: entry[0] };
      const item: HubEntry = { stream: where.stream, entry };
      for (const client of channel.clients) {
        if (client.held) client.held.push(item);
        else this.deliver(client, item);
      }
    }
  }

  private start(): void {
    if (this.loop || this.closed) return;
    this.loop = (this.cluster ? this.pollLoop() : this.blockingLoop()).catch((err: unknown) => {
      this.opts.logger.error({ err }, 'stream reader stopped');
    });
  }

  /**
   * Wake a blocked read so it picks up a newly watched chat. The UNBLOCK travels on another
   * connection than the read: it can reach Redis before the read it means is blocked there
   * (then it unblocks nothing, and the chat would wait out the whole block). So while that
   * same read is still outstanding, it is repeated until it hits.
   */
  private interrupt(): void {
    this.wake?.();
    if (this.cluster || !this.reading) return;
    const seq = this.readSeq;
    const unblock = (tries: number) => {
      const id = this.readerId;
      if (id === undefined || this.closed || !this.reading || this.readSeq !== seq) return;
      (this.opts.redis.client('UNBLOCK', id) as Promise<number>).then(
        (unblocked) => {
          if (unblocked === 0 && tries < UNBLOCK_TRIES)
            setTimeout(() => unblock(tries + 1), UNBLOCK_RETRY_MS);
        },
        () => {
          // The block timeout picks the chat up instead.
        },
      );
    };
    unblock(1);
  }

  private async idle(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
    this.wake = undefined;
  }

  private watchedReads(): { keys: string[]; ids: string[] } {
    const keys: string[] = [];
    const ids: string[] = [];
    for (const channel of this.channels.values()) {
      if (!this.byKey.has(channel.keys.outbox)) continue; // not ready yet
      for (const s of STREAMS) {
        keys.push(channel.keys[s]);
        ids.push(channel.cursor[s]);
      }
    }
    const tails = this.tails.reads();
    return { keys: [...keys, ...tails.keys], ids: [...ids, ...tails.ids] };
  }

  private async blockingLoop(): Promise<void> {
    const reader = this.opts.createReader();
    this.reader = reader;
    // A new connection has a new id. It is asked for before the next blocking read: asked
    // on 'ready', the question would queue behind a read already waiting to be sent.
    reader.on('close', () => {
      this.readerId = undefined;
    });
    reader.on('error', (err: Error) =>
      this.opts.logger.debug({ err: err.message }, 'stream reader connection error'),
    );
    while (!this.closed) {
      if (this.watchedReads().keys.length === 0) {
        await this.idle(this.blockMs);
        continue;
      }
      try {
        if (this.readerId === undefined) this.readerId = (await reader.client('ID')) as number;
        // From here to the read being sent nothing yields: a chat watched later interrupts it.
        const { keys, ids } = this.watchedReads();
        if (keys.length === 0) continue;
        this.readSeq++;
        this.reading = true;
        const res = (await reader.xread(
          'COUNT',
          READ_COUNT,
          'BLOCK',
          this.blockMs,
          'STREAMS',
          ...keys,
          ...ids,
        )) as Array<[string, StreamEntry[]]> | null;
        this.reading = false;
        for (const [key, entries] of res ?? []) this.dispatch(key, entries);
      } catch (err) {
        this.reading = false;
        if (this.closed) break;
        this.opts.logger.warn({ err: (err as Error).message }, 'stream read failed; retrying');
        await this.idle(500);
      }
    }
  }

  private async pollLoop(): Promise<void> {
    while (!this.closed) {
      const now = Date.now();
      const reads = [...this.channels.values()]
        .filter((c) => this.byKey.has(c.keys.outbox) && c.pollAt <= now)
        .map(async (c) => {
          try {
            const res = (await this.opts.redis.xread(
              'COUNT',
              READ_COUNT,
              'STREAMS',
              c.keys.outbox,
              c.keys.events,
              c.cursor.outbox,
              c.cursor.events,
            )) as Array<[string, StreamEntry[]]> | null;
            for (const [key, entries] of res ?? []) this.dispatch(key, entries);
            c.pollEvery = res ? this.pollMs : Math.min(this.pollMaxMs, c.pollEvery * 2);
          } catch (err) {
            refreshSlotsOnRedirect(this.opts.redis, err);
            this.opts.logger.debug({ err: (err as Error).message }, 'stream poll failed; retrying');
          }
          c.pollAt = Date.now() + c.pollEvery;
        });
      const tailReads = this.tails.poll(now, READ_COUNT, this.pollMaxMs, this.opts.logger);
      await Promise.all([...reads, ...tailReads]);
      if (!this.closed) await this.idle(this.pollMs);
    }
  }

  /** Stop reading; clients are the caller's to end. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wake?.();
    const reader = this.reader;
    if (reader) {
      // A blocked XREAD would hold quit() until its timeout: drop the connection.
      reader.disconnect();
    }
    await this.loop;
    this.channels.clear();
    this.byKey.clear();
    this.tails.clear();
  }
}
