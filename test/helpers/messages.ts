import type { ChatMessage } from '../../src/shared/messages.js';

export function userMessage(
  chatKey: string,
  id: string,
  text: string,
  extra: Partial<ChatMessage['metadata']> = {},
): ChatMessage {
  return {
    id,
    role: 'user',
    parts: [{ type: 'text', text }],
    metadata: { ts: Date.now(), chatKey, kind: 'normal', ...extra },
  };
}

export function assistantMessage(
  chatKey: string,
  id: string,
  text: string,
  extra: Partial<ChatMessage['metadata']> = {},
): ChatMessage {
  return {
    id,
    role: 'assistant',
    parts: [{ type: 'text', text }],
    metadata: { ts: Date.now(), chatKey, kind: 'normal', ...extra },
  };
}

export function textOf(message: ChatMessage): string {
  return message.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
}
