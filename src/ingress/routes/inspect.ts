import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { readArchive } from '../../shared/store/archive.js';
import { HttpError } from '../errors.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';
import { parsePageQuery } from './outbox.js';

const archiveQuery = z
  .object({
    after: z.string().max(32).optional(),
    limit: z.coerce.number().int().min(1).max(100).default(20),
  })
  .strict();

/** The archive's cursor is an entry's index (a page's `next`): a whole number, or 400 INVALID_CURSOR. */
function archiveAfter(after: string | undefined): number | undefined {
  if (after === undefined) return undefined;
  const index = /^\d{1,16}$/.test(after) ? Number(after) : Number.NaN;
  if (!Number.isSafeInteger(index)) {
    throw new HttpError('INVALID_CURSOR', 'after must be an archive index returned as `next`');
  }
  return index;
}

/** Operators' view of a chat: its event stream and its archive of compacted segments. */
export async function inspectRoutes(app: FastifyInstance): Promise<void> {
  const { store } = app.chatlane.deps;

  app.get('/chats/:chatKey/events', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const query = parsePageQuery(request.query);
    const items = await withRedis(() => store.readEvents(chatKey, query.after, query.limit));
    return { items, next: items.at(-1)?.id ?? query.after ?? null };
  });

  app.get('/chats/:chatKey/archive', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const query = parseOrThrow(archiveQuery, request.query, 'query');
    const after = archiveAfter(query.after);
    const rows = await withRedis(() => readArchive(store, chatKey, after, query.limit));
    const last = rows.at(-1)?.index;
    return {
      items: rows.map((r) => ({ index: r.index, ...r.entry })),
      next: last ?? after ?? null,
    };
  });
}
