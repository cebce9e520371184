import { Redis } from 'ioredis';
import { ensureRedis } from '../src/demo/dev-redis.js';
import { allChatKeys } from '../src/shared/keys.js';
import type { ChatMessage } from '../src/shared/messages.js';
import { DEFAULT_STORE_RETENTION, type StoreRetention } from '../src/shared/retention.js';
import { type ArchiveEntry, applyCompaction, readSnapshot } from '../src/shared/store/archive.js';
import { ChatStore } from '../src/shared/store/chat-store.js';
import { counted, freePort, prng, progress, round } from './lib/util.js';

/**
 * Memory per chat in Redis (issue 11 §3, issue 13 §6). Chats are written through the store's
 * own scripts (ingest, acquire, commit, outbox, finish, compact), not through HTTP, on a
 * throwaway `redis-server` of its own so INFO memory sees nothing else. Reports bytes per
 * stored history message, archived message, event, outbox item and seen id (MEMORY USAGE of
 * sampled keys over their entries), per idle chat (MEMORY USAGE of every key of a chat, and
 * the INFO used_memory delta over all chats), and the steady state of one long-lived chat
 * with the default retention against the same chat without caps.
 */

export const MEMORY_DEFAULTS = {
  chats: 10_000,
  messagesPerChat: 50,
  /** Chats whose keys are measured one by one (MEMORY USAGE ... SAMPLES 0 is exact but O(n)). */
  sampleChats: 200,
  /** Of the sampled chats, this many have their history compacted into the archive. */
  archiveChats: 200,
  steadyTurns: 3000,
  steadyEvery: 250,
  /** A compaction every this many turns in the steady-state chat (summary + archive entry). */
  compactEveryTurns: 20,
  concurrency: 64,
  eventsMaxLen: 300,
};
export type MemoryOptions = typeof MEMORY_DEFAULTS;

const WORDS =
  'the a to and of you it is that for on with can your this be order when we have will not what delivery please thanks time help account'.split(
    ' ',
  );

function filler(rand: () => number, min: number, max: number): string {
  const target = min + Math.floor(rand() * (max - min));
  let text = '';
  while (text.length < target) text += `${WORDS[Math.floor(rand() * WORDS.length)]} `;
  return text.trim();
}

function message(chatKey: string, id: string, role: 'user' | 'assistant', text: string): ChatMessage {
  return counted({
    id,
    role,
    parts: [{ type: 'text', text }],
    metadata: { ts: Date.now(), chatKey, kind: 'normal' },
  });
}

interface PrivateRedis {
  redis: Redis;
  port: number;
  stop(): Promise<void>;
}

/** Its own redis-server (no persistence, noeviction as in production), stopped at the end. */
async function startRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const server = await ensureRedis(`redis://127.0.0.1:${port}`);
  if (!server.started) throw new Error(`port ${port} already had a Redis: refusing to measure a shared one`);
  const redis = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: null });
  return {
    redis,
    port,
    async stop() {
      redis.disconnect();
      await server.stop();
    },
  };
}

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

async function usage(redis: Redis, key: string): Promise<number> {
  return Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
}

/** One turn: the user message in, a turn answering it (history + one outbox reply), done. */
async function turn(store: ChatStore, chatKey: string, n: number, rand: () => number): Promise<void> {
  const user = message(chatKey, `${chatKey}-u${n}`, 'user', filler(rand, 60, 200));
  const res = await store.ingest(chatKey, user, { maxPending: 1000, dedupWindowMs: 7 * 24 * 3600 * 1000 });
  if (res.status !== 'accepted') throw new Error(`ingest ${res.status}`);
  const lease = await store.acquire(chatKey, 'bench', 60_000);
  if (!lease.ok) throw new Error('busy');
  const answer = message(chatKey, `${chatKey}-a${n}`, 'assistant', filler(rand, 150, 600));
  const sent = await store.sendOutbox(chatKey, lease.fence, {
    runId: `r${n}`,
    text: answer.parts[0]!.type === 'text' ? answer.parts[0]!.text : '',
    ts: Date.now(),
  });
  if (!sent.ok) throw new Error('fenced');
  const done = await store.commit(chatKey, lease.fence, {
    runId: `r${n}`,
    consumed: [res.streamId],
    messages: [user, answer],
  });
  if (!done.ok) throw new Error(done.reason);
  await store.finish(chatKey, lease.fence, 'bench', `r${n}`);
}

/** Replace all but the newest `keep` history messages by a summary, archiving them (as compaction does). */
async function compact(store: ChatStore, chatKey: string, keep: number, n: number): Promise<number> {
  const { version, history } = await readSnapshot(store, chatKey);
  const replaced = history.slice(0, Math.max(0, history.length - keep));
  if (replaced.length < 2) return 0;
  const summary: ChatMessage = counted({
    id: `${chatKey}-s${n}`,
    role: 'assistant',
    parts: [{ type: 'text', text: filler(prng(n), 400, 800) }],
    metadata: { ts: Date.now(), chatKey, kind: 'summary' },
  });
  const archived = replaced.filter((m) => m.metadata.kind !== 'summary');
  const archive: ArchiveEntry = {
    id: `arc-${n}`,
    kind: 'compaction',
    createdAt: Date.now(),
    sourceRange: { fromId: archived[0]!.id, toId: archived.at(-1)!.id, count: archived.length },
    summaryId: summary.id,
    messages: archived,
  };
  const res = await applyCompaction(store, chatKey, {
    expectedVersion: version,
    replaced,
    summary,
    archive,
    maxEvents: store.maxEvents,
    eventData: {},
  });
  if (res.status !== 'ok') throw new Error(`compaction ${res.status}`);
  return archived.length;
}

async function chatBytes(store: ChatStore, chatKey: string): Promise<Record<string, number>> {
  const redis = store.redis as Redis;
  const k = store.keys(chatKey);
  const ctx = await redis.hkeys(k.contexts);
  const out: Record<string, number> = { total: 0 };
  for (const [name, key] of Object.entries(k)) out[name] = await usage(redis, key);
  for (const key of allChatKeys(store.prefix, chatKey, ctx)) out.total! += await usage(redis, key);
  return out;
}

async function inParallel(
  count: number,
  concurrency: number,
  each: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await each(next++);
    }),
  );
}

/** 10,000 chats × 50 messages: per-unit and per-chat bytes. */
async function fleet(redis: Redis, opts: MemoryOptions) {
  const store = new ChatStore(redis, { prefix: 'mem', maxEvents: opts.eventsMaxLen });
  const before = await usedMemory(redis);
  const turns = Math.floor(opts.messagesPerChat / 2);
  const t0 = Date.now();
  await inParallel(opts.chats, opts.concurrency, async (i) => {
    const chatKey = `chat-${i}`;
    const rand = prng(i + 1);
    for (let n = 0; n < turns; n++) await turn(store, chatKey, n, rand);
    await store.touchChat(chatKey);
    if (i % 1000 === 999) progress(`memory: ${i + 1}/${opts.chats} chats written`);
  });
  const writeSeconds = (Date.now() - t0) / 1000;
  const after = await usedMemory(redis);

  const sums = {
    outboxText: 0,
    hist: 0,
    histLen: 0,
    events: 0,
    eventsLen: 0,
    outbox: 0,
    outboxLen: 0,
    seen: 0,
    seenLen: 0,
    total: 0,
    json: 0,
  };
  const step = Math.max(1, Math.floor(opts.chats / opts.sampleChats));
  let sampled = 0;
  for (let i = 0; i < opts.chats && sampled < opts.sampleChats; i += step, sampled++) {
    const chatKey = `chat-${i}`;
    const k = store.keys(chatKey);
    const b = await chatBytes(store, chatKey);
    sums.hist += b.hist!;
    sums.events += b.events!;
    sums.outbox += b.outbox!;
    sums.seen += b.seen!;
    sums.total += b.total!;
    sums.histLen += await redis.llen(k.hist);
    sums.eventsLen += await redis.xlen(k.events);
    sums.outboxLen += await redis.xlen(k.outbox);
    sums.seenLen += await redis.zcard(k.seen);
    for (const raw of await redis.lrange(k.hist, 0, -1)) sums.json += Buffer.byteLength(raw);
    for (const item of await store.readOutbox(chatKey, undefined, 1000))
      sums.outboxText += Buffer.byteLength(item.text);
  }

  // The archive: compact the sampled chats' histories (all but the newest 10 messages).
  let archived = 0;
  let archiveBytes = 0;
  for (let i = 0, done = 0; i < opts.chats && done < opts.archiveChats; i += step, done++) {
    const chatKey = `chat-${i}`;
    archived += await compact(store, chatKey, 10, i);
    archiveBytes += await usage(redis, store.keys(chatKey).archive);
  }
  return {
    chats: opts.chats,
    messagesPerChat: turns * 2,
    writeSeconds: round(writeSeconds, 1),
    sampledChats: sampled,
    bytesPerHistoryMessage: round(sums.hist / sums.histLen, 0),
    historyMessageJsonBytes: round(sums.json / sums.histLen, 0),
    bytesPerArchivedMessage: round(archiveBytes / Math.max(1, archived), 0),
    bytesPerEvent: round(sums.events / sums.eventsLen, 0),
    bytesPerOutboxItem: round(sums.outbox / sums.outboxLen, 0),
    outboxItemTextBytes: round(sums.outboxText / sums.outboxLen, 0),
    bytesPerSeenId: round(sums.seen / sums.seenLen, 0),
    /** Every key of a chat (MEMORY USAGE), 50 messages, 25 replies, 25 events, seen ids still in the window. */
    bytesPerIdleChat: round(sums.total / sampled, 0),
    /** The same once the dedupe window has passed (the seen set expired). */
    bytesPerIdleChatAfterSeenExpiry: round((sums.total - sums.seen) / sampled, 0),
    /** INFO used_memory after minus before, over all chats (keys, index, allocator overhead). */
    usedMemoryDeltaPerChat: round((after - before) / opts.chats, 0),
    usedMemoryDeltaMiB: round((after - before) / 2 ** 20, 1),
  };
}

/** One chat living on: its bytes at checkpoints, with the given caps. */
async function longLived(
  redis: Redis,
  opts: MemoryOptions,
  label: string,
  retention: StoreRetention,
  maxEvents: number,
) {
  const store = new ChatStore(redis, { prefix: `steady-${label}`, maxEvents, retention });
  const rand = prng(7);
  const points: Array<{
    turns: number;
    bytes: number;
    /** All but the seen set, which holds every id of the dedupe window (bounded by time, not count). */
    bytesWithoutSeen: number;
    archive: number;
    outbox: number;
    events: number;
    hist: number;
    seen: number;
  }> = [];
  for (let n = 1; n <= opts.steadyTurns; n++) {
    await turn(store, 'long', n, rand);
    if (n % opts.compactEveryTurns === 0) await compact(store, 'long', 10, n);
    if (n % opts.steadyEvery === 0) {
      const b = await chatBytes(store, 'long');
      points.push({
        turns: n,
        bytes: b.total!,
        bytesWithoutSeen: b.total! - b.seen!,
        archive: b.archive!,
        outbox: b.outbox!,
        events: b.events!,
        hist: b.hist!,
        seen: b.seen!,
      });
    }
  }
  const last = points.at(-1)!.bytesWithoutSeen;
  const half = points[Math.floor(points.length / 2)]!.bytesWithoutSeen;
  return {
    label,
    retention: { ...retention, eventsMaxLen: maxEvents },
    points,
    /** bytesWithoutSeen: last checkpoint against the middle one. */
    growthSecondHalfPct: round(((last - half) / half) * 100, 1),
  };
}

export async function benchMemory(opts: MemoryOptions) {
  const server = await startRedis();
  try {
    progress(`memory: own redis-server on port ${server.port}`);
    const perUnit = await fleet(server.redis, opts);
    progress('memory: steady state of one long-lived chat');
    const bounded = await longLived(
      server.redis,
      opts,
      'retention-defaults',
      DEFAULT_STORE_RETENTION,
      opts.eventsMaxLen,
    );
    // As before retention: events capped at 1,000, outbox at ~10,000, archive and snapshots never.
    const before = await longLived(
      server.redis,
      opts,
      'before-retention',
      {
        archiveMaxEntries: 1e9,
        archiveMaxBytes: 1e15,
        contextsMax: 1e9,
        outboxKeep: 10_000,
        usageKeepDays: 0,
      },
      1000,
    );
    return { ...perUnit, steadyState: [bounded, before] };
  } finally {
    await server.stop();
  }
}
