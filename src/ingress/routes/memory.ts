import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { readMemory, writeMemory } from '../../shared/store/memory.js';
import { countTextTokens } from '../../shared/tokens.js';
import { HttpError } from '../errors.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';

export const DEFAULT_MEMORY_MAX_TOKENS = 1000;

const putBody = z.object({ content: z.string() }).strict();

/**
 * Operators read and replace a chat's memory document (the one the model keeps with
 * chat_memory_update). A replace is not a turn and takes no lease: it simply wins until the
 * model's next update.
 */
export async function memoryRoutes(app: FastifyInstance): Promise<void> {
  const { store } = app.chatlane.deps;
  const maxTokens = app.chatlane.deps.memoryMaxTokens ?? DEFAULT_MEMORY_MAX_TOKENS;

  const existing = async (params: unknown) => {
    const chatKey = parseChatKey((params as { chatKey?: unknown }).chatKey);
    if (!(await withRedis(() => store.chatExists(chatKey)))) {
      throw new HttpError('CHAT_NOT_FOUND', `no chat ${chatKey}`);
    }
    return chatKey;
  };

  app.get('/chats/:chatKey/memory', async (request) => {
    const chatKey = await existing(request.params);
    const content = await withRedis(() => readMemory(store, chatKey));
    return { chatKey, content, tokens: countTextTokens(content), maxTokens };
  });

  app.put('/chats/:chatKey/memory', async (request) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const { content } = parseOrThrow(putBody, request.body ?? undefined, 'body');
    // Checked before the chat lookup and the write: a refused document touches nothing.
    const tokens = countTextTokens(content);
    if (tokens > maxTokens) {
      throw new HttpError(
        'MEMORY_TOO_LARGE',
        `content is ${tokens} tokens; MEMORY_MAX_TOKENS is ${maxTokens}`,
      );
    }
    await existing(request.params);
    const res = await withRedis(() =>
      writeMemory(store, chatKey, { content, fence: undefined, runId: `op-${randomUUID()}`, maxTokens }),
    );
    if (res.status !== 'ok') throw new HttpError('MEMORY_TOO_LARGE', 'content is over MEMORY_MAX_TOKENS');
    return { chatKey, content, tokens: res.tokens, maxTokens };
  });
}
