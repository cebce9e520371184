import type { ChatMessage } from '../../src/shared/messages.js';
import { messageTokens } from '../../src/shared/tokens.js';

type Meta = Partial<ChatMessage['metadata']>;

function textMessage(
  role: 'user' | 'assistant',
  chatKey: string,
  id: string,
  text: string,
  extra: Meta,
): ChatMessage {
  return {
    id,
    role,
    parts: [{ type: 'text', text }],
    metadata: { ts: Date.now(), chatKey, kind: 'normal', ...extra },
  };
}

export const userMessage = (chatKey: string, id: string, text: string, extra: Meta = {}) =>
  textMessage('user', chatKey, id, text, extra);

export const assistantMessage = (chatKey: string, id: string, text: string, extra: Meta = {}) =>
  textMessage('assistant', chatKey, id, text, extra);

export function textOf(message: ChatMessage): string {
  return message.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
}

/** The message with its token count, as a commit stores it (short test texts: counted at once). */
export function counted(message: ChatMessage): ChatMessage {
  return { ...message, metadata: { ...message.metadata, tokens: messageTokens(message) } };
}

/** A `turn.committed` event's data as a worker writes it, for tests that record one by hand. */
export function committedEventData(runId: string) {
  return {
    runId,
    fence: '1',
    worker: 'test-worker',
    messageIds: ['m1'],
    consumed: 1,
    merged: 0,
    appended: 1,
    steps: 1,
    models: ['mock'],
    sent: 1,
    inputMessages: 1,
    tokens: 10,
    ms: 5,
  };
}
