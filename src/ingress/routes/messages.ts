import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ChatMessage } from '../../shared/messages.js';
import { extraSchema } from '../../shared/storable.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';

export const MAX_TEXT = 100_000;

/** A user message part as callers may send it (text, or a file by URL). */
export const partSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string().min(1).max(MAX_TEXT) }).strict(),
  z
    .object({
      type: z.literal('file'),
      mediaType: z.string().min(1).max(200),
      // Which URLs are allowed (https:, data: up to a cap) is the ingest's rule (file-parts.ts),
      // checked for every entry point; the body limit bounds a data: URL here.
      url: z.string().url(),
      filename: z.string().max(500).optional(),
    })
    .strict(),
]);

const metadataSchema = z
  .object({
    userId: z.string().max(200).optional(),
    username: z.string().max(200).optional(),
    channel: z.string().max(50).optional(),
    chatId: z.string().max(200).optional(),
    threadId: z.string().max(200).optional(),
    extra: extraSchema.optional(),
  })
  .strict();

export const postMessageBody = z
  .object({
    id: z
      .string()
      .regex(/^[A-Za-z0-9._:@-]{1,200}$/, 'id must be 1-200 characters of [A-Za-z0-9._:@-]')
      .optional(),
    text: z.string().min(1).max(MAX_TEXT).optional(),
    parts: z.array(partSchema).min(1).max(100).optional(),
    metadata: metadataSchema.optional(),
  })
  .strict()
  .refine((b) => b.text !== undefined || b.parts !== undefined, {
    message: 'give text or parts',
    path: ['text'],
  });
export type PostMessageBody = z.infer<typeof postMessageBody>;

export function toUserMessage(chatKey: string, body: PostMessageBody, now: number): ChatMessage {
  const id = body.id ?? randomUUID();
  const parts: ChatMessage['parts'] = [
    ...(body.text !== undefined ? [{ type: 'text' as const, text: body.text }] : []),
    ...(body.parts ?? []),
  ];
  const meta = body.metadata ?? {};
  return {
    id,
    role: 'user',
    parts,
    metadata: {
      ts: now,
      chatKey,
      kind: 'normal',
      channel: meta.channel ?? 'api',
      messageId: id,
      ...(meta.chatId !== undefined && { chatId: meta.chatId }),
      ...(meta.userId !== undefined && { userId: meta.userId }),
      ...(meta.username !== undefined && { username: meta.username }),
      ...(meta.threadId !== undefined && { threadId: meta.threadId }),
      ...(meta.extra !== undefined && { extra: meta.extra }),
    },
  };
}

export async function messageRoutes(app: FastifyInstance): Promise<void> {
  const { store } = app.deps;

  app.post('/chats/:chatKey/messages', async (request, reply) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const body = parseOrThrow(postMessageBody, request.body ?? undefined, 'body');
    const message = toUserMessage(chatKey, body, Date.now());
    const result = await app.ingest({ chatKey, message });
    return reply.code(202).send({ chatKey, messageId: result.messageId, status: result.status });
  });

  app.get('/chats/:chatKey/messages', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const [messages, pending] = await withRedis(() =>
      Promise.all([store.readHistory(chatKey), store.readAllPending(chatKey)]),
    );
    return { chatKey, messages, pending };
  });
}
