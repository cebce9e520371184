import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { parseOrThrow, withRedis } from '../validation.js';

const contactsQuery = z
  .object({
    query: z.string().max(200).optional(),
    limit: z.coerce.number().int().min(1).max(200).default(50),
  })
  .strict();

/**
 * `GET /v1/contacts?query=&limit=`: the contact book, most recently seen first; `query`
 * matches names containing it (case and a leading @ ignored).
 */
export async function contactRoutes(app: FastifyInstance): Promise<void> {
  app.get('/contacts', async (request) => {
    const q = parseOrThrow(contactsQuery, request.query, 'query');
    const contacts = await withRedis(() => app.chatlane.contacts.search(q.query ?? '', q.limit));
    return { contacts };
  });
}
