import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freeRange } from '../../scripts/chaos/cluster.js';
import { ask, type OwnRedis, ownRedis } from '../../scripts/chaos/redis-server.js';
import { HttpError } from '../../src/ingress/errors.js';
import { withRedis } from '../../src/ingress/validation.js';
import { chatKeys } from '../../src/shared/keys.js';
import { closeRedis, createRedisClient, SLOTS_REFRESH_MS, waitReady } from '../../src/shared/redis.js';
import { isRedisUnavailable } from '../../src/shared/redis-errors.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { userMessage } from '../helpers/messages.js';
import { randomPrefix, waitFor } from '../helpers/redis.js';

/**
 * A slot that moves while the client's slot map is stale. ioredis follows a MOVED of a lone
 * command, but inside an auto-pipelined batch (which chatlane's connections use) whose other
 * commands ran, each redirected command fails with the bare MOVED and the map stays stale
 * (redis/ioredis#2075). A failover run saw the ingress answer these with 500 INTERNAL.
 * Here: a two-node Cluster of our own (A serves slots 0–8191, B the rest) on free ports.
 */

const LIMITS = { maxPending: 100, dedupWindowMs: 60_000 };
const dirs: string[] = [];
let a: OwnRedis;
let b: OwnRedis;
let ids: { a: string; b: string };

async function clusterCall(port: number, ...args: string[]): Promise<unknown> {
  const reply = await ask(port, (r) =>
    r.call('CLUSTER', ...args).catch((err: unknown) => ({ failed: String(err) })),
  );
  if (reply === undefined || (typeof reply === 'object' && reply !== null && 'failed' in reply))
    throw new Error(`CLUSTER ${args.join(' ')} on ${port} failed: ${JSON.stringify(reply)}`);
  return reply;
}

async function node(port: number): Promise<OwnRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'chatlane-redirect-'));
  dirs.push(dir);
  const server = ownRedis(dir, port, {
    args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--appendonly', 'no'],
  });
  await server.start();
  return server;
}

beforeAll(async () => {
  const base = await freeRange(2);
  [a, b] = await Promise.all([node(base), node(base + 1)]);
  await clusterCall(a.port, 'ADDSLOTSRANGE', '0', '8191');
  await clusterCall(b.port, 'ADDSLOTSRANGE', '8192', '16383');
  await clusterCall(a.port, 'MEET', '127.0.0.1', String(b.port));
  ids = {
    a: String(await clusterCall(a.port, 'MYID')),
    b: String(await clusterCall(b.port, 'MYID')),
  };
  for (const port of [a.port, b.port])
    await waitFor(
      async () => String(await clusterCall(port, 'INFO')).includes('cluster_state:ok') || undefined,
      { what: `cluster_state:ok on ${port}` },
    );
}, 30_000);

afterAll(async () => {
  await Promise.all([a?.stop('SIGKILL'), b?.stop('SIGKILL')]);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Waits until the client's slot map says B serves `slot`. */
async function mapNamesB(redis: Cluster, slot: number, timeoutMs: number): Promise<void> {
  await waitFor(async () => redis.slots[slot]?.[0] === `127.0.0.1:${b.port}` || undefined, {
    timeoutMs,
    what: `the slot map to name B for slot ${slot}`,
  });
}

const movedSlots = new Set<number>();

/** Moves an empty slot from A to B, as `redis-cli --cluster reshard` does. */
async function moveSlot(slot: number): Promise<void> {
  movedSlots.add(slot);
  await clusterCall(b.port, 'SETSLOT', String(slot), 'IMPORTING', ids.a);
  await clusterCall(a.port, 'SETSLOT', String(slot), 'MIGRATING', ids.b);
  await clusterCall(b.port, 'SETSLOT', String(slot), 'NODE', ids.b);
  await clusterCall(a.port, 'SETSLOT', String(slot), 'NODE', ids.b);
}

/**
 * Two chats of `prefix` whose slots are on A, distinct and empty: one batch to A holds both.
 * Empty, because a chat's slot does not depend on the prefix (its hash tag is the chat key):
 * an earlier test's `stays` chat holds keys on A, and A refuses to hand over a slot it still
 * holds keys in — unless B's announcement of the move reached A first (CI saw that race).
 */
async function twoChatsOnA(prefix: string): Promise<[Chat, Chat]> {
  const chats: Chat[] = [];
  for (let i = 0; chats.length < 2; i++) {
    const chatKey = `chat-${i}`;
    const slot = Number(await clusterCall(a.port, 'KEYSLOT', chatKeys(prefix, chatKey).inbox));
    if (slot > 8191 || movedSlots.has(slot) || chats.some((c) => c.slot === slot)) continue;
    if (Number(await clusterCall(a.port, 'COUNTKEYSINSLOT', String(slot))) > 0) continue;
    chats.push({ chatKey, slot });
  }
  return chats as [Chat, Chat];
}

interface Chat {
  chatKey: string;
  slot: number;
}

/**
 * Two chats whose slots are on A, an ingress client (auto-pipelining, the periodic slot
 * refresh) with A's map loaded, then the first chat's slot moved to B: `run` gets them all.
 */
async function withMovedSlot(
  run: (s: { prefix: string; moved: Chat; stays: Chat; redis: Cluster }) => Promise<void>,
): Promise<void> {
  const prefix = randomPrefix('redirect');
  const [moved, stays] = await twoChatsOnA(prefix);
  const redis = createRedisClient(
    { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_CLUSTER_NODES: [{ host: '127.0.0.1', port: a.port }] },
    'ingress',
  ) as Cluster;
  redis.on('error', () => undefined);
  try {
    await waitReady(redis);
    await moveSlot(moved.slot);
    await run({ prefix, moved, stays, redis });
  } finally {
    await closeRedis(redis);
  }
}

describe('a Cluster slot that moved under an auto-pipelined batch', () => {
  it('fails the redirected write as 503 REDIS_UNAVAILABLE (not 500), writes it nowhere, and the retry lands on the new owner', () =>
    withMovedSlot(async ({ prefix, moved, stays, redis }) => {
      const store = new ChatStore(redis, { prefix, maxEvents: 100 });
      expect(redis.slots[moved.slot]).toEqual([`127.0.0.1:${a.port}`]);

      const ingest = (chatKey: string, id: string) =>
        withRedis(() => store.ingest(chatKey, userMessage(chatKey, id, id), LIMITS));
      // Both in one tick: one auto-pipelined batch to A, which runs one and redirects the other.
      const [first, second] = await Promise.allSettled([
        ingest(moved.chatKey, 'm1'),
        ingest(stays.chatKey, 's1'),
      ]);
      expect(second).toMatchObject({ status: 'fulfilled', value: { status: 'accepted' } });
      expect(first.status).toBe('rejected');
      const err = (first as PromiseRejectedResult).reason as HttpError;
      expect(err).toBeInstanceOf(HttpError);
      expect(err.code).toBe('REDIS_UNAVAILABLE');
      expect(err.statusCode).toBe(503);
      expect(String((err.cause as Error).message)).toMatch(/^MOVED \d+ /);
      // Asked of B itself: a lone command through the client would be redirected, and that
      // redirect alone refreshes the client's slot map.
      const inboxOnB = () => ask(b.port, (r) => r.xlen(chatKeys(prefix, moved.chatKey).inbox));
      expect(await inboxOnB()).toBe(0);

      // The failed write refreshed the slot map, so the next batch routes the chat to B (well
      // before the periodic refresh, SLOTS_REFRESH_MS after the client connected).
      await mapNamesB(redis, moved.slot, 2000);
      const [retry, next] = await Promise.all([ingest(moved.chatKey, 'm1'), ingest(stays.chatKey, 's2')]);
      expect(retry.status).toBe('accepted');
      expect(next.status).toBe('accepted');
      expect((await store.readInbox(moved.chatKey, 10)).map((e) => e.message.id)).toEqual(['m1']);
      expect(await inboxOnB()).toBe(1);
    }));

  it(
    'refreshes within SLOTS_REFRESH_MS a slot map that a redirect nobody reports left stale',
    () =>
      withMovedSlot(async ({ prefix, moved, stays, redis }) => {
        const read = () => redis.xread('COUNT', 10, 'STREAMS', chatKeys(prefix, moved.chatKey).outbox, '0');
        const write = () => redis.set(chatKeys(prefix, stays.chatKey).meta, '1');
        // A plain read redirected in a batch with a write that ran: ioredis neither follows the
        // redirect nor refreshes its map, and no chatlane script is there to do it.
        const [first, second] = await Promise.allSettled([read(), write()]);
        expect(second).toEqual({ status: 'fulfilled', value: 'OK' });
        expect(first.status).toBe('rejected');
        const err = (first as PromiseRejectedResult).reason as Error;
        expect(err.message).toMatch(/^MOVED \d+ /);
        expect(isRedisUnavailable(err)).toBe(true);
        expect(redis.slots[moved.slot]).toEqual([`127.0.0.1:${a.port}`]);

        await mapNamesB(redis, moved.slot, SLOTS_REFRESH_MS + 3000);
        expect(await Promise.all([read(), write()])).toEqual([null, 'OK']);
      }),
    20_000,
  );

  it('counts the read-only batch ioredis re-runs after a redirect, and fails across two nodes, as unavailable', () =>
    withMovedSlot(async ({ prefix, moved, stays, redis }) => {
      const read = (chat: Chat) =>
        redis.xread('COUNT', 10, 'STREAMS', chatKeys(prefix, chat.chatKey).outbox, '0');
      // As the stream hub polls on a Cluster: every watched chat's XREAD in one tick.
      const results = await Promise.allSettled([read(moved), read(stays)]);
      for (const r of results) {
        expect(r.status).toBe('rejected');
        expect(isRedisUnavailable((r as PromiseRejectedResult).reason)).toBe(true);
      }
      await mapNamesB(redis, moved.slot, 2000);
      expect(await Promise.all([read(moved), read(stays)])).toEqual([null, null]);
    }));
});
