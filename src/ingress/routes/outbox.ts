import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';

/** Stream ids are the cursors: `<ms>-<seq>`. */
export const cursorQuery = z
  .object({
    after: z
      .string()
      .regex(/^\d{1,20}-\d{1,20}$/, 'after must be a cursor returned as `next`')
      .optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

export async function outboxRoutes(app: FastifyInstance): Promise<void> {
  const { store } = app.deps;
  app.get('/chats/:chatKey/outbox', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const query = parseOrThrow(cursorQuery, request.query, 'query');
    const items = await withRedis(() => store.readOutbox(chatKey, query.after, query.limit));
    return { items, next: items.at(-1)?.id ?? query.after ?? null };
  });
}
