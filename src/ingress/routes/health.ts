import type { FastifyInstance } from 'fastify';
import { errorBody } from '../errors.js';

const PING_TIMEOUT_MS = 1000;

export async function healthRoutes(app: FastifyInstance): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    if (app.chatlane.lifecycle.shuttingDown) {
      return reply.code(503).send(errorBody('SHUTTING_DOWN', 'ingress is shutting down'));
    }
    try {
      await Promise.race([
        app.chatlane.deps.redis.ping(),
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('ping timeout')), PING_TIMEOUT_MS).unref(),
        ),
      ]);
      return { status: 'ready' };
    } catch (err) {
      app.log.warn({ err: (err as Error).message }, 'readiness: redis is not reachable');
      return reply.code(503).send(errorBody('REDIS_UNAVAILABLE', 'redis is not reachable'));
    }
  });
}
