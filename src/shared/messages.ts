import type { UIMessage } from 'ai';
import { z } from 'zod';
import { isRetrievedPart, retrievedText } from './retrieved.js';

/**
 * chatlane's message: an AI SDK `UIMessage` whose metadata we check with zod at every
 * Redis read. Provider formats appear only at the model boundary (convertToModelMessages).
 */

export const sourceRangeSchema = z.object({
  fromId: z.string(),
  toId: z.string(),
  count: z.number().int().nonnegative(),
});
export type SourceRange = z.infer<typeof sourceRangeSchema>;

export const messageMetadataSchema = z
  .object({
    ts: z.number(),
    chatKey: z.string(),
    channel: z.string().optional(),
    chatId: z.string().optional(),
    userId: z.string().optional(),
    username: z.string().optional(),
    messageId: z.string().optional(),
    threadId: z.string().optional(),
    runId: z.string().optional(),
    kind: z.enum(['normal', 'summary']).default('normal'),
    sourceRange: sourceRangeSchema.optional(),
    previousSummaryId: z.string().optional(),
    tokens: z.number().int().nonnegative().optional(),
    /** Set when `tokens` counts the message cut to this many text characters (its model view). */
    tokensMaxChars: z.number().int().positive().optional(),
    /** Set when the message could not be processed (docs/agent.md "When a message fails"). */
    failed: z.boolean().optional(),
    failure: z.object({ code: z.string(), detail: z.string().optional() }).optional(),
    /**
     * The W3C traceparent of the ingest that stored the message (tracing on): the turn that
     * consumes it links to it, so the message's trace reaches its turn across processes.
     */
    traceparent: z.string().optional(),
    /** Caller-supplied fields we carry but do not interpret. */
    extra: z.record(z.string(), z.unknown()).optional(),
  })
  .passthrough();
export type MessageMetadata = z.infer<typeof messageMetadataSchema>;

export type ChatMessage = UIMessage<MessageMetadata> & { metadata: MessageMetadata };

// Parts are stored as the AI SDK produced them (tool parts included); we check the shape
// we rely on and keep the rest.
const partSchema = z.object({ type: z.string() }).passthrough();

export const chatMessageSchema = z.object({
  id: z.string().min(1),
  role: z.enum(['system', 'user', 'assistant']),
  metadata: messageMetadataSchema,
  parts: z.array(partSchema),
});

export class CorruptMessageError extends Error {
  override name = 'CorruptMessageError';
}

export function parseStoredMessage(json: string): ChatMessage {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new CorruptMessageError(`stored message is not JSON: ${json.slice(0, 80)}`);
  }
  const parsed = chatMessageSchema.safeParse(raw);
  if (!parsed.success) {
    throw new CorruptMessageError(`stored message has a bad shape: ${parsed.error.issues[0]?.message}`);
  }
  return parsed.data as ChatMessage;
}

/** The plain text of a message (text parts only), for token counting, search and previews. */
export function messageText(message: Pick<ChatMessage, 'parts'>): string {
  const out: string[] = [];
  for (const part of message.parts) {
    if (part.type === 'text' || part.type === 'reasoning') out.push(part.text);
  }
  return out.join('\n');
}

/** Text the model sees of a message, tool calls and results included (token counting). */
export function messageTokenText(message: Pick<ChatMessage, 'parts' | 'role'>): string {
  const out: string[] = [message.role];
  for (const part of message.parts as Array<{ type: string } & Record<string, unknown>>) {
    if (part.type === 'text' || part.type === 'reasoning') out.push(String(part.text ?? ''));
    else if (part.type.startsWith('tool-') || part.type === 'dynamic-tool') {
      out.push(part.type, JSON.stringify(part.input ?? null), JSON.stringify(part.output ?? null));
    } else if (part.type === 'file') out.push(String(part.filename ?? part.url ?? 'file'));
    // What a stage retrieved for the message is read by the model as the label and the text.
    else if (isRetrievedPart(part)) out.push(retrievedText(part) ?? '');
  }
  return out.join('\n');
}

export function isSummary(message: ChatMessage): boolean {
  return message.metadata?.kind === 'summary';
}

/**
 * The id of a run's assistant message number `segment` (0 first) in history. The first one is
 * also the UI message id of the run's streamed reply, so a page that streamed the reply and one
 * that reads history later see the same message.
 */
export function assistantMessageId(runId: string, segment = 0): string {
  return `${runId}-a${segment}`;
}
