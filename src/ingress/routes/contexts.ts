import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { enqueueTurn } from '../../shared/jobs.js';
import {
  type ContextMeta,
  findContext,
  getContext,
  getContextMessages,
  listContexts,
  switchContext,
} from '../../shared/store/contexts.js';
import { HttpError } from '../errors.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';

/** How long an operator's switch may hold the chat's lane. */
const OPERATOR_LEASE_MS = 10_000;

const listQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) }).strict();

export const contextActionBody = z.discriminatedUnion('action', [
  z
    .object({
      action: z.literal('new'),
      title: z.string().max(120).optional(),
      reason: z.string().max(500).optional(),
    })
    .strict(),
  z.object({ action: z.literal('clear'), reason: z.string().max(500).optional() }).strict(),
  z
    .object({
      action: z.literal('load'),
      contextId: z.string().max(40).optional(),
      query: z.string().min(1).max(500).optional(),
      reason: z.string().max(500).optional(),
    })
    .strict()
    .refine((b) => b.contextId || b.query, { message: 'give contextId or query', path: ['contextId'] }),
]);

/**
 * Operators' context switching. A switch goes through the chat's lane like a turn does —
 * lease, fenced script, release — so it can never interleave with a running turn.
 */
export async function contextRoutes(app: FastifyInstance): Promise<void> {
  const { store, turns } = app.chatlane.deps;

  app.get('/chats/:chatKey/contexts', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const { limit } = parseOrThrow(listQuery, request.query, 'query');
    return { chatKey, contexts: await withRedis(() => listContexts(store, chatKey, limit)) };
  });

  app.get('/chats/:chatKey/contexts/:contextId', async (request) => {
    const params = request.params as { chatKey?: unknown; contextId?: string };
    const chatKey = parseChatKey(params.chatKey);
    const id = params.contextId ?? '';
    const meta = await withRedis(() => getContext(store, chatKey, id));
    if (!meta) throw new HttpError('CONTEXT_NOT_FOUND', `no context ${id} in chat ${chatKey}`);
    return {
      chatKey,
      context: meta,
      messages: await withRedis(() => getContextMessages(store, chatKey, id)),
    };
  });

  app.post('/chats/:chatKey/contexts', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const body = parseOrThrow(contextActionBody, request.body ?? undefined, 'body');

    // Resolve the chat and the target before taking the lane, so a miss writes nothing at all
    // (taking the lane creates the chat's meta and events).
    if (!(await withRedis(() => store.chatExists(chatKey)))) {
      throw new HttpError('CHAT_NOT_FOUND', `no chat ${chatKey}`);
    }
    let target: ContextMeta | undefined;
    if (body.action === 'load') {
      target = await withRedis(() =>
        body.contextId
          ? getContext(store, chatKey, body.contextId)
          : findContext(store, chatKey, body.query ?? ''),
      );
      if (!target)
        throw new HttpError('CONTEXT_NOT_FOUND', `no context matches ${body.contextId ?? `"${body.query}"`}`);
    }

    const requestId = `op-${randomUUID()}`;
    const owner = `ingress:${requestId}`;
    const lease = await withRedis(() => store.acquire(chatKey, owner, OPERATOR_LEASE_MS));
    if (!lease.ok) {
      throw new HttpError(
        'CHAT_BUSY',
        `a turn is running in this chat; retry in ${Math.ceil(lease.ttlMs / 1000)}s`,
      );
    }
    try {
      const res = await withRedis(() =>
        switchContext(store, chatKey, lease.fence, {
          op: body.action,
          runId: requestId,
          ...('title' in body && body.title ? { title: body.title } : {}),
          ...(body.reason ? { reason: body.reason } : {}),
          ...(target ? { load: target } : {}),
        }),
      );
      if (res.status === 'not-found') throw new HttpError('CONTEXT_NOT_FOUND', 'the context disappeared');
      if (res.status === 'fenced-out') throw new HttpError('CHAT_BUSY', 'a turn took the chat; retry');
      return {
        chatKey,
        action: body.action,
        archivedContextId: res.archivedId ?? null,
        archivedMessages: res.archivedCount,
        loadedContextId: target?.id ?? null,
        loadedMessages: res.loadedCount,
      };
    } finally {
      const done = await store.finish(chatKey, lease.fence, owner, requestId).catch(() => undefined);
      // Messages that arrived meanwhile found the lane taken; make sure a turn follows.
      if (done && done.pending > 0) await enqueueTurn(turns, chatKey).catch(() => undefined);
    }
  });
}
