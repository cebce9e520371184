import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ChatMessage } from '../shared/messages.js';
import { extraSchema } from '../shared/storable.js';

/**
 * What a person's message may hold, for every HTTP entry point that takes one
 * (`POST /v1/chats/:chatKey/messages`, `POST /v1/ui`, `POST /webhooks/generic/:source`), and
 * the stored `UIMessage` built from it. One definition, so the entry points cannot drift apart.
 */

export const MAX_TEXT = 100_000;
export const MAX_PARTS = 100;

/** A caller-chosen message id: the idempotency key, so it must survive a Redis key and a URL. */
export const messageIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9._:@-]{1,200}$/, 'id must be 1-200 characters of [A-Za-z0-9._:@-]');

const textPart = { type: z.literal('text'), text: z.string().min(1).max(MAX_TEXT) };
const filePart = {
  type: z.literal('file'),
  mediaType: z.string().min(1).max(200),
  // Which URLs are allowed (https:, data: up to a cap) is the ingest's rule (file-parts.ts),
  // checked for every entry point; the body limit bounds a data: URL here.
  url: z.string().url(),
  filename: z.string().max(500).optional(),
};

/** A user message part as API callers send it (text, or a file by URL); an unknown field is refused. */
export const partSchema = z.discriminatedUnion('type', [z.strictObject(textPart), z.strictObject(filePart)]);

/**
 * The same parts as AI SDK `useChat` builds them: it may add fields of its own (provider
 * metadata, state), which are dropped rather than refused or stored.
 */
export const webPartSchema = z.discriminatedUnion('type', [z.object(textPart), z.object(filePart)]);

export type UserPart = z.infer<typeof partSchema>;

/** A body's `text` and `parts` fields (spread into its object); refine it with `hasTextOrParts`. */
export const contentFields = {
  text: z.string().min(1).max(MAX_TEXT).optional(),
  parts: z.array(partSchema).min(1).max(MAX_PARTS).optional(),
};

/** The refinement every such body carries: `.refine(hasTextOrParts, TEXT_OR_PARTS)`. */
export const hasTextOrParts = (body: { text?: unknown; parts?: unknown }): boolean =>
  body.text !== undefined || body.parts !== undefined;
export const TEXT_OR_PARTS = { message: 'give text or parts', path: ['text'] };

export const userMetadataSchema = z
  .object({
    userId: z.string().max(200).optional(),
    username: z.string().max(200).optional(),
    channel: z.string().max(50).optional(),
    chatId: z.string().max(200).optional(),
    threadId: z.string().max(200).optional(),
    extra: extraSchema.optional(),
  })
  .strict();

/** A message as an entry point has validated it: text, parts or both (text first). */
export interface UserMessageInput {
  id?: string | undefined;
  text?: string | undefined;
  parts?: UserPart[] | undefined;
  metadata?: z.infer<typeof userMetadataSchema> | undefined;
}

export function toUserMessage(chatKey: string, input: UserMessageInput, now: number): ChatMessage {
  const id = input.id ?? randomUUID();
  const parts: ChatMessage['parts'] = [
    ...(input.text !== undefined ? [{ type: 'text' as const, text: input.text }] : []),
    ...(input.parts ?? []),
  ];
  const meta = input.metadata ?? {};
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
