import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { readChatUsage } from '../../shared/store/usage.js';
import { HttpError } from '../errors.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';

/** A UTC day as the usage is kept: YYYY-MM-DD, and a real date. */
const day = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a day, YYYY-MM-DD')
  .refine((d) => {
    const t = Date.parse(`${d}T00:00:00Z`);
    // 2026-02-30 parses as 2026-03-02: only a day that reads back the same exists.
    return Number.isFinite(t) && new Date(t).toISOString().startsWith(d);
  }, 'is not a date');

const usageQuery = z
  .object({ from: day.optional(), to: day.optional() })
  .strict()
  .refine((q) => !q.from || !q.to || q.from <= q.to, { message: 'must not be after to', path: ['from'] });

/**
 * A chat's model usage, summed by model and by day (UTC), with its cost when a price file
 * is configured (MODEL_PRICES_FILE). docs/usage-and-cost.md.
 */
export async function usageRoutes(app: FastifyInstance): Promise<void> {
  const { store } = app.chatlane.deps;

  app.get('/chats/:chatKey/usage', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const range = parseOrThrow(usageQuery, request.query, 'query');
    if (!(await withRedis(() => store.chatExists(chatKey)))) {
      throw new HttpError('CHAT_NOT_FOUND', `no chat ${chatKey}`);
    }
    const usage = await withRedis(() =>
      readChatUsage(store, chatKey, range, app.chatlane.deps.usage?.prices),
    );
    const budget = app.chatlane.deps.usage?.dailyTokenBudget;
    return budget ? { ...usage, dailyTokenBudget: budget } : usage;
  });
}
