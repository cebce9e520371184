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
import { closeRedis, createRedisClient, waitReady } from '../../src/shared/redis.js';
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
  const reply = await ask(port, (r) => r.call('CLUSTER', ...args));
  if (reply === undefined) throw new Error(`CLUSTER ${args.join(' ')} on ${port} failed`);
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

/** Moves an empty slot from A to B, as `redis-cli --cluster reshard` does. */
async function moveSlot(slot: number): Promise<void> {
  await clusterCall(b.port, 'SETSLOT', String(slot), 'IMPORTING', ids.a);
  await clusterCall(a.port, 'SETSLOT', String(slot), 'MIGRATING', ids.b);
  await clusterCall(b.port, 'SETSLOT', String(slot), 'NODE', ids.b);
  await clusterCall(a.port, 'SETSLOT', String(slot), 'NODE', ids.b);
}

describe('a Cluster slot that moved under an auto-pipelined batch', () => {
  it('fails the redirected write as 503 REDIS_UNAVAILABLE (not 500), writes it nowhere, and the retry lands on the new owner', async () => {
    const prefix = randomPrefix('redirect');
    // Two chats whose slots are both on A: the client sends their writes to A in one batch.
    const slotOf = async (chatKey: string) =>
      Number(await clusterCall(a.port, 'KEYSLOT', chatKeys(prefix, chatKey).inbox));
    const onA: Array<{ chatKey: string; slot: number }> = [];
    for (let i = 0; onA.length < 2; i++) {
      const slot = await slotOf(`chat-${i}`);
      if (slot <= 8191 && !onA.some((c) => c.slot === slot)) onA.push({ chatKey: `chat-${i}`, slot });
    }
    const [moved, stays] = onA as [{ chatKey: string; slot: number }, { chatKey: string; slot: number }];

    const redis = createRedisClient(
      { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_CLUSTER_NODES: [{ host: '127.0.0.1', port: a.port }] },
      'ingress',
    ) as Cluster;
    redis.on('error', () => undefined);
    try {
      await waitReady(redis);
      const store = new ChatStore(redis, { prefix, maxEvents: 100 });
      await moveSlot(moved.slot);
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

      // The failed write refreshed the slot map, so the next batch routes the chat to B.
      await waitFor(async () => redis.slots[moved.slot]?.[0] === `127.0.0.1:${b.port}` || undefined, {
        timeoutMs: 5000,
        what: 'the slot map to name B for the moved slot',
      });
      const [retry, next] = await Promise.all([ingest(moved.chatKey, 'm1'), ingest(stays.chatKey, 's2')]);
      expect(retry.status).toBe('accepted');
      expect(next.status).toBe('accepted');
      expect((await store.readInbox(moved.chatKey, 10)).map((e) => e.message.id)).toEqual(['m1']);
      expect(await inboxOnB()).toBe(1);
    } finally {
      await closeRedis(redis);
    }
  });
});
