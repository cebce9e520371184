import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { closeRedis, createRedis, waitReady } from '../../src/shared/redis.js';
import { serveAnchor } from './serve.js';

/**
 * The ingress anchor: the least a message endpoint can do — parse JSON, RPUSH it to a
 * per-chat list, add the chat's turn job — on the same Redis client options and the same
 * `enqueueTurn` dedup call as the real ingress. What chatlane spends beyond this (zod
 * validation, the ingest script's dedup and inbox cap, the activity index) is the ratio.
 *
 * Env: PORT, HOST, REDIS_URL, BENCH_PREFIX. Run: node --import tsx bench/anchors/ingress-server.ts
 */

const prefix = process.env.BENCH_PREFIX ?? 'clbench-anchor';
const redis = createRedis(
  process.env.REDIS_URL || 'redis://127.0.0.1:6379',
  'ingress',
  'chatlane:bench-anchor',
);
await waitReady(redis, 10_000);
const turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);

await serveAnchor(
  async (chatKey, body) => {
    await redis.rpush(`${prefix}:{c:${chatKey}}:list`, JSON.stringify(body));
    await enqueueTurn(turns, chatKey);
  },
  async () => {
    await turns.close().catch(() => undefined);
    await closeRedis(redis);
  },
);
