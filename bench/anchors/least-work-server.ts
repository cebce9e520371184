import { Queue } from 'bullmq';
import Fastify from 'fastify';
import { Redis } from 'ioredis';

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

const app = Fastify({ logger: false, bodyLimit: 256 * 1024 });
app.get('/healthz', async () => ({ status: 'ok' }));
app.post('/v1/chats/:chatKey/messages', async (request, reply) => {
  const { chatKey } = request.params as { chatKey: string };
  await redis.rpush(`${prefix}:{c:${chatKey}}:list`, JSON.stringify(request.body));
  await turns.add('turn', { chatKey });
  return reply.code(202).send({ chatKey, status: 'accepted' });
});

await app.listen({ host: process.env.HOST || '127.0.0.1', port: Number(process.env.PORT || 0) });

let stopping = false;
const stop = () => {
  if (stopping) process.exit(1);
  stopping = true;
  void (async () => {
    await app.close().catch(() => undefined);
    await turns.close().catch(() => undefined);
    redis.disconnect();
    process.exit(0);
  })();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
