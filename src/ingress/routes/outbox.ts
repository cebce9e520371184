import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { isStreamId } from '../../shared/stream-id.js';
import { HttpError } from '../errors.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';

const cursorQuery = z
  .object({
    after: z.string().max(64).optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

/**
 * `?after=&limit=` of a page over a stream: the cursor is a stream id `<ms>-<seq>` (a page's
 * `next`). Anything else is 400 INVALID_CURSOR; a cursor past the end reads an empty page.
 */
export function parsePageQuery(query: unknown): z.infer<typeof cursorQuery> {
  const page = parseOrThrow(cursorQuery, query, 'query');
  if (page.after !== undefined && !isStreamId(page.after)) {
    throw new HttpError('INVALID_CURSOR', 'after must be a cursor returned as `next` (`<ms>-<seq>`)');
  }
  return page;
}

export async function outboxRoutes(app: FastifyInstance): Promise<void> {
  const { store } = app.chatlane.deps;
  app.get('/chats/:chatKey/outbox', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const query = parsePageQuery(request.query);
    const items = await withRedis(() => store.readOutbox(chatKey, query.after, query.limit));
    return { items, next: items.at(-1)?.id ?? query.after ?? null };
  });
}
