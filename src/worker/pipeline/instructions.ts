import type { ChatInstructions, Provider } from './types.js';

/**
 * `provider` with the operator's instructions for each chat (`instructions` given in code as
 * a function of the chat): computed on every load that has messages to answer, from the
 * chat's key and its newest pending message's channel and chat id (what the system prompt's
 * runtime context names), and returned as the input's `instructions`, which the Assembler
 * puts in the chat's part. Read per turn like the chat's memory; a throw fails the attempt.
 */
export function withChatInstructions(provider: Provider, instructions: ChatInstructions): Provider {
  return {
    reads: provider.reads,
    async load(chatKey, read) {
      const input = await provider.load(chatKey, read);
      const latest = input.pending.at(-1)?.message.metadata;
      if (!latest) return input;
      const text = await instructions({
        chatKey,
        ...(latest.channel !== undefined && { channel: latest.channel }),
        ...(latest.chatId !== undefined && { chatId: latest.chatId }),
      });
      return typeof text === 'string' && text.trim() ? { ...input, instructions: text } : input;
    },
  };
}
