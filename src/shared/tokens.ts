import { countTokens } from 'gpt-tokenizer';
import { type ChatMessage, messageTokenText } from './messages.js';

/** Fixed per-message overhead (role, separators) as OpenAI-style chat formats count it. */
const MESSAGE_OVERHEAD = 4;

export function countTextTokens(text: string): number {
  return countTokens(text);
}

/**
 * Tokens of one message. Computed once, when a message is committed, and stored in
 * `metadata.tokens`, so later turns never re-tokenize old history.
 */
export function messageTokens(message: ChatMessage): number {
  const cached = message.metadata?.tokens;
  if (typeof cached === 'number') return cached;
  return countTokens(messageTokenText(message)) + MESSAGE_OVERHEAD;
}

export function withTokens(message: ChatMessage): ChatMessage {
  if (typeof message.metadata?.tokens === 'number') return message;
  return { ...message, metadata: { ...message.metadata, tokens: messageTokens(message) } };
}
