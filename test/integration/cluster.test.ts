import { Cluster, type Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { chatKeys, chatsIndexKey } from '../../src/shared/keys.js';
import type { Logger } from '../../src/shared/logger.js';
import { checkRedisPolicy } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { type ReplyField, ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { userMessage } from '../helpers/messages.js';
import {
  dataNodes,
  deletePrefix,
  keysUnder,
  REDIS_CLUSTER_NODES,
  randomPrefix,
  testRedis,
} from '../helpers/redis.js';
import { holdLeases } from '../helpers/turn-deps.js';

/**
 * How chatlane's keys land on a Redis Cluster. Runs only against a cluster
 * (`npm run test:cluster`, or REDIS_CLUSTER_NODES set); skipped on a single Redis.
 */
const CHATS = 100;

describe.skipIf(!REDIS_CLUSTER_NODES)('Redis Cluster layout', () => {
  const redis = testRedis() as Cluster;
  const prefix = randomPrefix('cluster');
  const chats = Array.from({ length: CHATS }, (_, i) => `chat-${i}`);
  let masters: Redis[];
  const nodeName = (n: Redis) => `${n.options.host}:${n.options.port}`;

  /** The master serving `slot`, from the cluster's own CLUSTER SLOTS answer. */
  let masterOfSlot: (slot: number) => string;

  beforeAll(async () => {
    expect(redis).toBeInstanceOf(Cluster);
    masters = await dataNodes(redis);
    const ranges = await redis.cluster('SLOTS');
    masterOfSlot = (slot) => {
      const range = ranges.find(([from, to]) => slot >= from && slot <= to);
      const master = range?.[2];
      if (!master) throw new Error(`no master serves slot ${slot}`);
      return `${master[0]}:${master[1]}`;
    };
  });

  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  const keyslot = async (key: string) => Number(await redis.cluster('KEYSLOT', key));

  it('runs on a cluster of 3 masters', () => {
    expect(masters).toHaveLength(3);
  });

  it("renews leases of chats on different masters together: each its own call in its chat's slot", async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 100 });
    const leases = await holdLeases(store, chats.slice(0, 6));
    expect(await store.renewMany(leases)).toEqual(leases.map(() => true));
    for (const l of leases) {
      expect(Number((await store.readMeta(l.chatKey)).leaseUntil)).toBeGreaterThan(Date.now() + 50_000);
      await store.finish(l.chatKey, l.fence, l.owner, l.runId);
    }
  });

  it("appends to replies of chats on different masters together: each its own fenced call in its chat's slot", async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 100 });
    const replies = new ReplyStreams(redis, { prefix, maxEvents: 100, maxLen: 50, ttlMs: 60_000 });
    const leases = await holdLeases(store, chats.slice(6, 12));
    const [held] = await holdLeases(store, [chats[12]!]);
    const delta = (d: string): ReplyField => ['c', JSON.stringify({ type: 'text-delta', id: 't', delta: d })];
    // One reply's call fails (its stream key holds a string): only that reply gets the error.
    const broken = { chatKey: held!.chatKey, fence: held!.fence, runId: 'run-broken', fields: [delta('x')] };
    await redis.set(replies.key(broken.chatKey, broken.runId), 'not a stream');
    const results = await replies.appendMany([
      ...leases.map((l) => ({
        chatKey: l.chatKey,
        fence: l.fence,
        runId: l.runId,
        fields: [delta(l.chatKey)],
      })),
      broken,
    ]);
    expect(results.slice(0, -1)).toEqual(leases.map(() => 'ok'));
    expect(results.at(-1)).toMatchObject({
      error: expect.objectContaining({ message: expect.stringMatching(/WRONGTYPE/) }),
    });
    await redis.del(replies.key(broken.chatKey, broken.runId));
    await store.finish(held!.chatKey, held!.fence, held!.owner, held!.runId);
    for (const l of leases) {
      const entries = await replies.read(l.chatKey, l.runId);
      expect(entries.map((e) => (e.kind === 'chunk' ? e.chunk.delta : undefined))).toEqual([l.chatKey]);
      await store.finish(l.chatKey, l.fence, l.owner, l.runId);
    }
  });

  it(`puts every key of one chat in one slot, and spreads ${CHATS} chats over every master`, async () => {
    const slotOfChat = new Map<string, number>();
    for (const chatKey of chats) {
      const slots = await Promise.all(Object.values(chatKeys(prefix, chatKey)).map(keyslot));
      expect(new Set(slots).size, chatKey).toBe(1);
      slotOfChat.set(chatKey, slots[0]!);
    }
    expect(new Set(slotOfChat.values()).size).toBeGreaterThan(CHATS * 0.9); // ~16384 slots: few collisions
    const perMaster = new Map<string, number>();
    for (const slot of slotOfChat.values()) {
      const master = masterOfSlot(slot);
      perMaster.set(master, (perMaster.get(master) ?? 0) + 1);
    }
    expect([...perMaster.keys()].sort()).toEqual(masters.map(nodeName).sort());
    // Three equal slot ranges: each master gets a fair share (expected 33 of 100).
    for (const count of perMaster.values()) expect(count).toBeGreaterThan(CHATS / 6);
  });

  it('stores each chat whole on the master that owns its slot, and the chats on every master', async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 100 });
    for (const chatKey of chats) {
      const result = await store.ingest(chatKey, userMessage(chatKey, `${chatKey}-m0`, 'hi'), {
        maxPending: 10,
        dedupWindowMs: 60_000,
      });
      expect(result.status).toBe('accepted');
      await store.touchChat(chatKey);
    }
    const chatsOn = new Map<string, Set<string>>();
    for (const node of masters) {
      const keys = (await keysUnder(node, prefix)).filter((k) => k.includes(':{c:'));
      const owned = new Set(keys.map((k) => /\{c:([^}]+)\}/.exec(k)![1]!));
      chatsOn.set(nodeName(node), owned);
    }
    // Every master holds some chats; no chat is split over two masters.
    for (const [node, owned] of chatsOn) expect(owned.size, node).toBeGreaterThan(0);
    const all = [...chatsOn.values()].flatMap((s) => [...s]);
    expect(all.sort()).toEqual([...chats].sort());
    // The activity index is one key on one master, holding every chat.
    expect(await redis.zcard(chatsIndexKey(prefix))).toBe(CHATS);
  });

  it('keeps each BullMQ queue in one slot (prefix hash tag), and queues on their own slots', async () => {
    const turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
    const compaction = createQueue(prefix, QUEUES.compaction, redis);
    try {
      for (const chatKey of chats.slice(0, 10)) await enqueueTurn(turns, chatKey);
      await compaction.add('compaction', { chatKey: 'chat-0' });
      expect(await turns.getWaitingCount()).toBe(10);
      for (const [name, queue] of [
        [QUEUES.turns, turns],
        [QUEUES.compaction, compaction],
      ] as const) {
        const keys = await keysUnder(redis, queue.opts.prefix!);
        expect(keys.length, name).toBeGreaterThan(3);
        const slots = new Set(await Promise.all(keys.map(keyslot)));
        expect(slots.size, name).toBe(1);
        // All of the queue's keys sit on exactly one master.
        const holders = [];
        for (const node of masters)
          if ((await keysUnder(node, queue.opts.prefix!)).length > 0) holders.push(node);
        expect(holders.map(nodeName), name).toEqual([masterOfSlot([...slots][0]!)]);
      }
      expect(await keyslot(`${turns.opts.prefix}:x`)).not.toBe(await keyslot(`${compaction.opts.prefix}:x`));
    } finally {
      await turns.obliterate({ force: true }).catch(() => undefined);
      await compaction.obliterate({ force: true }).catch(() => undefined);
      await turns.close();
      await compaction.close();
    }
  });

  it('warns at startup about every master whose maxmemory-policy is not noeviction', async () => {
    const entries: Array<{ level: string; obj: Record<string, unknown> }> = [];
    const logger = {
      warn: (obj: Record<string, unknown>) => entries.push({ level: 'warn', obj }),
      debug: (obj: Record<string, unknown>) => entries.push({ level: 'debug', obj }),
    } as unknown as Logger;
    await checkRedisPolicy(redis, logger);
    expect(entries).toEqual([]); // the test cluster runs noeviction everywhere

    const victim = masters[1]!;
    const [, before] = (await victim.config('GET', 'maxmemory-policy')) as [string, string];
    await victim.config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      await checkRedisPolicy(redis, logger);
    } finally {
      await victim.config('SET', 'maxmemory-policy', before);
    }
    expect(entries).toEqual([
      { level: 'warn', obj: { redis: nodeName(victim), maxmemoryPolicy: 'allkeys-lru' } },
    ]);
  });
});
