import type { ChatMessage } from '../../shared/messages.js';

type Part = ChatMessage['parts'][number];

/**
 * A stored message as a web page shows it, the way the reply stream showed it while it was
 * written: each `chat_send` call becomes the text it sent (what the person read); other tool
 * calls stay tool parts (a page shows them collapsed).
 */
export function toWebMessage(message: ChatMessage): ChatMessage {
  if (message.role !== 'assistant') return message;
  const parts: Part[] = [];
  for (const part of message.parts) {
    if (part.type === 'tool-chat_send') {
      const input = (part as { input?: unknown }).input;
      const text =
        typeof input === 'object' && input !== null ? (input as { text?: unknown }).text : undefined;
      if (typeof text === 'string') parts.push({ type: 'text', text, state: 'done' });
      continue;
    }
    parts.push(part);
  }
  return { ...message, parts };
}
