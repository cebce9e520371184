import type { Logger } from '../../shared/logger.js';
import { type RedisClient, refreshSlotsOnRedirect } from '../../shared/redis.js';
import type { StreamEntry } from '../../shared/store/chat-store.js';
import { compareStreamIds, rangeStartAfter } from '../../shared/stream-id.js';

/**
 * Single streams followed by key (a turn's reply stream, `/v1/ui`), read by the hub's one
 * reader beside the chats' outbox and events: one entry per followed key, whatever the
 * number of its clients. Each client replays its backlog first (live entries are held back
 * meanwhile) and never sees an entry twice or out of order, as the hub's chat clients.
 */

/** Receives one client's entries, oldest first; must not throw. */
export type TailSink = (entry: StreamEntry) => void;

interface TailClient {
  cursor: string;
  held: StreamEntry[] | undefined;
  sink: TailSink;
}

interface Tail {
  /** The newest entry read (or the stream's last entry when following began). */
  cursor: string;
  clients: Set<TailClient>;
  ready: Promise<void>;
  /** Set once `ready` has settled: only then is the tail read. */
  live: boolean;
  pollEvery: number;
  pollAt: number;
}

const PAGE = 500;

export class KeyTails {
  private readonly tails = new Map<string, Tail>();

  constructor(
    private readonly redis: RedisClient,
    /** Wake the reader so its next read includes a newly followed key. */
    private readonly onWatch: () => void,
    private readonly pollMs: number,
  ) {}

  /** Follow `key` from after `from` ('0-0': every entry it holds), then live. */
  async follow(key: string, from: string, sink: TailSink): Promise<() => void> {
    const tail = this.watch(key);
    const client: TailClient = { cursor: from, held: [], sink };
    tail.clients.add(client);
    const close = () => {
      tail.clients.delete(client);
      if (tail.clients.size === 0 && this.tails.get(key) === tail) this.tails.delete(key);
    };
    try {
      await tail.ready;
      for (let after = from; ; ) {
        const start = rangeStartAfter(after);
        if (start === undefined) break;
        const page = (await this.redis.xrange(key, start, '+', 'COUNT', PAGE)) as StreamEntry[];
        for (const entry of page) deliver(client, entry);
        if (page.length < PAGE) break;
        after = page.at(-1)![0];
      }
    } catch (err) {
      close();
      throw err;
    }
    const held = client.held ?? [];
    client.held = undefined;
    for (const entry of held) deliver(client, entry);
    return close;
  }

  private watch(key: string): Tail {
    const existing = this.tails.get(key);
    if (existing) return existing;
    const tail: Tail = {
      cursor: '0-0',
      clients: new Set(),
      ready: Promise.resolve(),
      live: false,
      pollEvery: this.pollMs,
      pollAt: 0,
    };
    tail.ready = (async () => {
      const last = (await this.redis.xrevrange(key, '+', '-', 'COUNT', 1)) as StreamEntry[];
      tail.cursor = last[0]?.[0] ?? '0-0';
      tail.live = true;
      this.onWatch();
    })();
    tail.ready.catch(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    this.tails.set(key, tail);
    return tail;
  }

  /** What a blocking read should ask for: every live tail with its cursor. */
  reads(): { keys: string[]; ids: string[] } {
    const keys: string[] = [];
    const ids: string[] = [];
    for (const [key, tail] of this.tails) {
      if (!tail.live) continue;
      keys.push(key);
      ids.push(tail.cursor);
    }
    return { keys, ids };
  }

  /**
   * Cluster: one non-blocking read per followed key that is due, sooner after news and backing
   * off (doubling) to `pollMaxMs` while it stays quiet, as the hub reads chats.
   */
  poll(now: number, count: number, pollMaxMs: number, logger: Logger): Promise<void>[] {
    const reads: Promise<void>[] = [];
    for (const [key, tail] of this.tails) {
      if (!tail.live || tail.pollAt > now) continue;
      reads.push(
        (async () => {
          let news = false;
          try {
            const res = (await this.redis.xread('COUNT', count, 'STREAMS', key, tail.cursor)) as Array<
              [string, StreamEntry[]]
            > | null;
            for (const [k, entries] of res ?? []) this.dispatch(k, entries);
            news = res !== null;
          } catch (err) {
            refreshSlotsOnRedirect(this.redis, err);
            logger.debug({ err: (err as Error).message }, 'reply stream poll failed; retrying');
          }
          tail.pollEvery = news ? this.pollMs : Math.min(pollMaxMs, tail.pollEvery * 2);
          tail.pollAt = Date.now() + tail.pollEvery;
        })(),
      );
    }
    return reads;
  }

  /** New entries of a followed key to its clients; false when the key is not followed. */
  dispatch(key: string, entries: StreamEntry[]): boolean {
    const tail = this.tails.get(key);
    if (!tail) return false;
    for (const entry of entries) {
      if (compareStreamIds(entry[0], tail.cursor) <= 0) continue;
      tail.cursor = entry[0];
      for (const client of tail.clients) {
        if (client.held) client.held.push(entry);
        else deliver(client, entry);
      }
    }
    return true;
  }

  clear(): void {
    this.tails.clear();
  }
}

function deliver(client: TailClient, entry: StreamEntry): void {
  if (compareStreamIds(entry[0], client.cursor) <= 0) return;
  client.cursor = entry[0];
  client.sink(entry);
}
