import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { readArchive } from '../../shared/store/archive.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';
import { cursorQuery } from './outbox.js';

const archiveQuery = z
  .object({
    after: z.coerce.number().int().min(0).optional(),
    limit: z.coerce.number().int().min(1).max(100).default(20),
  })
  .strict();

/** Operators' view of a chat: its event stream and its archive of compacted segments. */
export async function inspectRoutes(app: FastifyInstance): Promise<void> {
  const { store } = app.chatlane.deps;

  app.get('/chats/:chatKey/events', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const query = parseOrThrow(cursorQuery, request.query, 'query');
    const items = await withRedis(() => store.readEvents(chatKey, query.after, query.limit));
    return { items, next: items.at(-1)?.id ?? query.after ?? null };
  });

  app.get('/chats/:chatKey/archive', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const query = parseOrThrow(archiveQuery, request.query, 'query');
    const rows = await withRedis(() => readArchive(store, chatKey, query.after, query.limit));
    const last = rows.at(-1)?.index;
    return {
      items: rows.map((r) => ({ index: r.index, ...r.entry })),
      next: last ?? query.after ?? null,
    };
  });
}
