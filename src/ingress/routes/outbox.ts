import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';

const U64_MAX = 2n ** 64n - 1n;

/** A Redis stream id `<ms>-<seq>`: two unsigned 64-bit integers (Redis refuses anything larger). */
export function isStreamId(value: string): boolean {
  const m = /^(\d{1,20})-(\d{1,20})$/.exec(value);
  return m !== null && BigInt(m[1]!) <= U64_MAX && BigInt(m[2]!) <= U64_MAX;
}

/** Stream ids are the cursors: `<ms>-<seq>`. */
export const cursorQuery = z
  .object({
    after: z.string().refine(isStreamId, 'after must be a cursor returned as `next`').optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

export async function outboxRoutes(app: FastifyInstance): Promise<void> {
  const { store } = app.chatlane.deps;
  app.get('/chats/:chatKey/outbox', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const query = parseOrThrow(cursorQuery, request.query, 'query');
    const items = await withRedis(() => store.readOutbox(chatKey, query.after, query.limit));
    return { items, next: items.at(-1)?.id ?? query.after ?? null };
  });
}
