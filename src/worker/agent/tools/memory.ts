import { tool } from 'ai';
import { z } from 'zod';
import type { ChatStore } from '../../../shared/store/chat-store.js';
import { writeMemory } from '../../../shared/store/memory.js';
import { toolInput } from './input.js';

export interface MemoryToolDeps {
  store: ChatStore;
  chatKey: string;
  fence: string;
  runId: string;
  /** MEMORY_MAX_TOKENS */
  maxTokens: number;
  onFencedOut: () => void;
}

// Built once; the token cap is checked by writeMemory, this only bounds the tokenizer's work.
const INPUT = toolInput(z.object({ content: z.string().max(200_000) }));

/**
 * `chat_memory_update`: the model replaces this chat's memory document. A fenced write like
 * every turn write; over the cap it is a tool error, so the model can shorten and retry.
 */
export function createMemoryTool(d: MemoryToolDeps) {
  return tool({
    description:
      "Replace this chat's memory document (shown to you at the start of every turn, kept across " +
      `context switches and summaries). Write the whole document, at most ${d.maxTokens} tokens: ` +
      'durable facts about the people and the chat worth remembering. Empty content clears it.',
    inputSchema: INPUT,
    execute: async ({ content }) => {
      const res = await writeMemory(d.store, d.chatKey, {
        content,
        fence: d.fence,
        runId: d.runId,
        maxTokens: d.maxTokens,
      });
      if (res.status === 'too-large') {
        throw new Error(
          `memory not saved: ${res.tokens} tokens, the limit is ${res.maxTokens}; shorten it and try again`,
        );
      }
      if (res.status === 'fenced-out') d.onFencedOut();
      return res;
    },
  });
}
