import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { answerOf } from '../../shared/store/approvals.js';
import {
  contentFields,
  hasTextOrParts,
  messageIdSchema,
  TEXT_OR_PARTS,
  toUserMessage,
  userMetadataSchema,
} from '../user-message.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';

export const postMessageBody = z
  .object({
    id: messageIdSchema.optional(),
    ...contentFields,
    metadata: userMetadataSchema.optional(),
  })
  .strict()
  .refine(hasTextOrParts, TEXT_OR_PARTS);

export async function messageRoutes(app: FastifyInstance): Promise<void> {
  const { store } = app.chatlane.deps;

  app.post('/chats/:chatKey/messages', async (request, reply) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const body = parseOrThrow(postMessageBody, request.body ?? undefined, 'body');
    const message = toUserMessage(chatKey, body, Date.now());
    const result = await app.chatlane.ingest({ chatKey, message });
    return reply.code(202).send({ chatKey, messageId: result.messageId, status: result.status });
  });

  app.get('/chats/:chatKey/messages', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const [messages, pending] = await withRedis(() =>
      Promise.all([store.readHistory(chatKey), store.readAllPending(chatKey)]),
    );
    // Approval answers wait in the inbox as entries of their own: not a person's messages.
    return { chatKey, messages, pending: pending.filter((m) => !answerOf(m)) };
  });
}
