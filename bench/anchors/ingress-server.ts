import Fastify from 'fastify';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { closeRedis, createRedis, waitReady } from '../../src/shared/redis.js';

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

// Same body limit as the ingress default, so both parse the same bodies the same way.
const app = Fastify({ logger: false, bodyLimit: 256 * 1024 });
app.get('/healthz', async () => ({ status: 'ok' }));
app.post('/v1/chats/:chatKey/messages', async (request, reply) => {
  const { chatKey } = request.params as { chatKey: string };
  await redis.rpush(`${prefix}:{c:${chatKey}}:list`, JSON.stringify(request.body));
  await enqueueTurn(turns, chatKey);
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
    await closeRedis(redis);
    process.exit(0);
  })();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
