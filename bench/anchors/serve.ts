import Fastify from 'fastify';

/**
 * What both ingress anchors share, so they differ only in what they do with a message:
 * Fastify as the ingress builds it (logger off, the ingress's default body limit, so both
 * parse the same bodies the same way), GET /healthz, POST /v1/chats/:chatKey/messages
 * answering 202 after `store`, and a stop on SIGTERM/SIGINT that runs `close` (a second
 * signal exits at once).
 */
export async function serveAnchor(
  store: (chatKey: string, body: unknown) => Promise<void>,
  close: () => Promise<void>,
): Promise<void> {
  const app = Fastify({ logger: false, bodyLimit: 256 * 1024 });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.post('/v1/chats/:chatKey/messages', async (request, reply) => {
    const { chatKey } = request.params as { chatKey: string };
    await store(chatKey, request.body);
    return reply.code(202).send({ chatKey, status: 'accepted' });
  });

  await app.listen({ host: process.env.HOST || '127.0.0.1', port: Number(process.env.PORT || 0) });

  let stopping = false;
  const stop = () => {
    if (stopping) process.exit(1);
    stopping = true;
    void (async () => {
      await app.close().catch(() => undefined);
      await close();
      process.exit(0);
    })();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
