import { randomBytes } from 'node:crypto';
import { Cluster, type Redis } from 'ioredis';
import { loadConfig } from '../../src/shared/config.js';
import {
  type ConnectionRole,
  createRedisClient,
  type RedisClient,
  waitReady,
} from '../../src/shared/redis.js';

const config = loadConfig();
export const REDIS_URL = config.REDIS_URL;
/** Set when the run targets a Redis Cluster (`REDIS_CLUSTER_NODES`); spawned roles inherit it via env. */
export const REDIS_CLUSTER_NODES = config.REDIS_CLUSTER_NODES;
/** The connection variables of this run, for `loadConfig({ ...REDIS_ENV, ... })` in tests. */
export const REDIS_ENV: Record<string, string> = {
  REDIS_URL,
  ...(REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: process.env.REDIS_CLUSTER_NODES ?? '' } : {}),
};

/** Every test gets its own key space. */
export function randomPrefix(label = 't'): string {
  return `cltest-${label}-${randomBytes(PREFIX_ID_BYTES).toString('hex')}`;
}

const PREFIX_ID_BYTES = 4;

/**
 * Every prefix `randomPrefix(label)` makes, as a SCAN pattern, and no other label's: a plain
 * `cltest-<label>-*` also matched `cltest-<label>-in-…`, so one file's cleanup deleted the
 * keys of another file running beside it (`hostile` and `hostile-in`).
 */
export function labelPattern(label: string): string {
  return `cltest-${label}-${'[0-9a-f]'.repeat(PREFIX_ID_BYTES * 2)}`;
}

/** Deletes what every test of `label` left (files that make a prefix per test). */
export async function deleteLabel(redis: RedisClient, label: string): Promise<void> {
  await deletePrefix(redis, labelPattern(label));
}

/** A connection to the Redis or Cluster the config names; waiting (worker role) unless asked to fail fast. */
export function testRedis(role: ConnectionRole = 'worker'): RedisClient {
  return createRedisClient({ ...config, REDIS_COMMAND_TIMEOUT_MS: TEST_COMMAND_TIMEOUT_MS }, role);
}

/**
 * The ingress role's command timeout in tests that share the suite's Redis: a CI box running
 * every file at once can stall a command past the default second, and a test then got its
 * 503 (ingress.test.ts's first request, "Command timed out"). What that timeout does is
 * tested on clients of its own (hung-redis.test.ts, ready-queue.test.ts).
 */
const TEST_COMMAND_TIMEOUT_MS = 10_000;

/** The servers holding data: the Redis itself, or every master of a Cluster. */
export async function dataNodes(redis: RedisClient): Promise<Redis[]> {
  if (!(redis instanceof Cluster)) return [redis];
  await waitReady(redis, 10_000);
  return redis.nodes('master');
}

async function scanNode(node: Redis, prefix: string, each: (keys: string[]) => Promise<void>): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await each(keys);
  } while (cursor !== '0');
}

export async function deletePrefix(redis: RedisClient, prefix: string): Promise<void> {
  for (const node of await dataNodes(redis)) {
    // One DEL per key: keys of one Cluster node still live in many slots (no CROSSSLOT).
    await scanNode(node, prefix, async (keys) => {
      await node.pipeline(keys.map((k) => ['del', k])).exec();
    });
  }
}

export async function keysUnder(redis: RedisClient, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for (const node of await dataNodes(redis)) {
    await scanNode(node, prefix, async (keys) => {
      out.push(...keys);
    });
  }
  return out.sort();
}

/**
 * Each chat key's type and element count (string length for a string), to prove a request added
 * nothing to a chat's keys that already existed. Queue keys are left out: BullMQ's own event
 * stream records even a deduplicated job.
 */
export async function keySizes(redis: RedisClient, keys: string[]): Promise<Array<[string, string, number]>> {
  const sizeOf: Record<string, (k: string) => Promise<number>> = {
    list: (k) => redis.llen(k),
    hash: (k) => redis.hlen(k),
    stream: (k) => redis.xlen(k),
    zset: (k) => redis.zcard(k),
    set: (k) => redis.scard(k),
    string: (k) => redis.strlen(k),
  };
  const chatKeys = keys.filter((k) => k.includes(':{c:'));
  return Promise.all(
    chatKeys.map(async (k): Promise<[string, string, number]> => {
      const type = await redis.type(k);
      return [k, type, (await sizeOf[type]?.(k)) ?? -1];
    }),
  );
}

export async function waitFor<T>(
  fn: () => Promise<T | undefined | false>,
  { timeoutMs = 20_000, intervalMs = 50, what = 'condition' } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
