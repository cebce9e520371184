import { tool } from 'ai';
import { z } from 'zod';
import { writeMemory } from '../../../shared/store/memory.js';
import { toolInput } from './input.js';
import { turnOf } from './tool-turn.js';

// Built once; the token cap is checked by writeMemory, this only bounds the tokenizer's work.
const INPUT = toolInput(z.object({ content: z.string().max(200_000) }));

/**
 * `chat_memory_update`: the model replaces this chat's memory document. A fenced write like
 * every turn write; over the cap it is a tool error, so the model can shorten and retry.
 * Built once per process with MEMORY_MAX_TOKENS; the turn comes with each call (tool-turn.ts).
 */
export function createMemoryTool(maxTokens: number) {
  return tool({
    // Offered on every turn, so in every model request: no word more than its meaning needs.
    description:
      "Replace this chat's memory document (shown every turn, kept across context switches and " +
      `summaries). Write it whole, at most ${maxTokens} tokens: lasting facts worth remembering ` +
      'about the people and the chat. Empty content clears it.',
    inputSchema: INPUT,
    execute: async ({ content }, options) => {
      const turn = turnOf(options);
      const res = await writeMemory(turn.store, turn.chatKey, {
        content,
        fence: turn.fence,
        runId: turn.runId,
        maxTokens,
      });
      if (res.status === 'too-large') {
        throw new Error(
          `memory not saved: ${res.tokens} tokens, the limit is ${res.maxTokens}; shorten it and try again`,
        );
      }
      if (res.status === 'fenced-out') turn.fencedOut('memory update fenced out');
      return res;
    },
  });
}
