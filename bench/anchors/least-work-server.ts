import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { serveAnchor } from './serve.js';

/**
 * The ingress's least-work anchor: Fastify with its defaults (logger off), one RPUSH of the
 * body to a per-chat list and one plain BullMQ `Queue.add` — two Redis round trips a message,
 * as chatlane's ingest script and turn add are, and nothing else: no validation, no
 * idempotency, no limits, no metrics, no security headers, no chatlane client options.
 * What the real ingress spends beyond it is everything a message endpoint should do.
 *
 * Env: PORT, HOST, REDIS_URL, BENCH_PREFIX. Run: node --import tsx bench/anchors/least-work-server.ts
 */

const prefix = process.env.BENCH_PREFIX ?? 'clbench-least';
const redis = new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
const turns = new Queue('turns', { connection: redis, prefix: `${prefix}:{q:turns}` });

await serveAnchor(
  async (chatKey, body) => {
    await redis.rpush(`${prefix}:{c:${chatKey}}:list`, JSON.stringify(body));
    await turns.add('turn', { chatKey });
  },
  async () => {
    await turns.close().catch(() => undefined);
    redis.disconnect();
  },
);
