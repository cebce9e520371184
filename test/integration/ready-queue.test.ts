import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type OwnRedis, ownRedis } from '../../scripts/chaos/redis-server.js';
import type { Queue } from '../../src/shared/bullmq.js';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { readyQueue } from '../../src/shared/ready-queue.js';
import { closeRedis, createRedisClient, type RedisClient, waitReady } from '../../src/shared/redis.js';
import { freePort } from '../helpers/ports.js';
import { randomPrefix } from '../helpers/redis.js';

/**
 * A Redis stall while a queue is being set up. BullMQ asks for the server's version once, when
 * a Queue is built, and keeps the answer — or the failure. On an ingress connection (commands
 * time out after REDIS_COMMAND_TIMEOUT_MS) a stall of a second at that moment broke the queue
 * for good: a CI run's ingress stored every message and answered 503 for each, and enqueued
 * no turn. Its own redis-server on a free port, paused with SIGSTOP; the shared one never is.
 */

let server: OwnRedis;
let dir: string;
const clients: RedisClient[] = [];
const queues: Array<Queue<TurnJob>> = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chatlane-ready-queue-'));
  server = ownRedis(dir, await freePort());
  await server.start();
});
afterEach(async () => {
  if (server.pid()) process.kill(server.pid()!, 'SIGCONT');
  await Promise.all(queues.splice(0).map((q) => q.close().catch(() => undefined)));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => closeRedis(c)));
  await server.stop('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function ingressConnection(): Promise<RedisClient> {
  const redis = createRedisClient(
    { REDIS_URL: server.url, REDIS_CLUSTER_NODES: undefined, REDIS_COMMAND_TIMEOUT_MS: 500 },
    'ingress',
  );
  redis.on('error', () => undefined);
  clients.push(redis);
  await waitReady(redis);
  return redis;
}

/** Redis stops answering for `ms`, starting now. */
function stall(ms: number): Promise<void> {
  process.kill(server.pid()!, 'SIGSTOP');
  return new Promise((resolve) =>
    setTimeout(() => {
      process.kill(server.pid()!, 'SIGCONT');
      resolve();
    }, ms),
  );
}

const build = (redis: RedisClient, prefix: string) => () => {
  const queue = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
  queues.push(queue);
  return queue;
};

describe('a queue set up during a Redis stall', () => {
  it('built once (BullMQ as it is), it fails every add after Redis is back', async () => {
    const redis = await ingressConnection();
    const stalled = stall(1200);
    const queue = build(redis, randomPrefix('readyq'))();
    queue.on('error', () => undefined);
    await stalled;
    expect(await redis.ping()).toBe('PONG');
    await expect(enqueueTurn(queue, 'chat-a')).rejects.toThrow(/Command timed out/);
    await expect(enqueueTurn(queue, 'chat-a')).rejects.toThrow(/Command timed out/);
  });

  it('through readyQueue, is built again until Redis answers, and then takes adds', async () => {
    const redis = await ingressConnection();
    const prefix = randomPrefix('readyq');
    const stalled = stall(1200);
    const queue = await readyQueue(build(redis, prefix), { timeoutMs: 10_000 });
    await stalled;
    // More than one was built: the first failed its setup.
    expect(queues.length).toBeGreaterThan(1);
    await enqueueTurn(queue, 'chat-a');
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });

  it('fails the start with the reason once Redis has not answered for timeoutMs', async () => {
    const redis = await ingressConnection();
    const stalled = stall(2500);
    await expect(readyQueue(build(redis, randomPrefix('readyq')), { timeoutMs: 1000 })).rejects.toThrow(
      /queue turns: BullMQ could not set up its connection \(Command timed out\)/,
    );
    await stalled;
  });
});
