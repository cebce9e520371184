import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { createMergeRoom, responseTokens } from '../../src/worker/agent/merge-room.js';

const call = (id: string): ModelMessage => ({
  role: 'assistant',
  content: [
    { type: 'tool-call', toolCallId: id, toolName: 'chat_history_search', input: { query: `q ${id}` } },
  ],
});
const result = (id: string, text: string): ModelMessage => ({
  role: 'tool',
  content: [
    {
      type: 'tool-result',
      toolCallId: id,
      toolName: 'chat_history_search',
      output: { type: 'text', value: text },
    },
  ],
});

describe('merge room', () => {
  it('leaves the budget less the assembled input, the step responses so far and earlier merges', () => {
    const room = createMergeRoom(10_000, 4_000);
    const responses: ModelMessage[] = [call('a'), result('a', 'one two three')];
    expect(room.left(responses)).toBe(6_000 - responseTokens(responses));
    room.take(100);
    // Later steps append their responses: the room shrinks by exactly what they add.
    responses.push(call('b'), result('b', 'a much longer tool result '.repeat(50)));
    expect(room.left(responses)).toBe(5_900 - responseTokens(responses));
    expect(room.left(responses)).toBe(5_900 - responseTokens(responses));
    responses.push({ role: 'assistant', content: 'plain text' });
    expect(room.left(responses)).toBe(5_900 - responseTokens(responses));
  });

  it('after a context switch counts the new input in place of the one the turn started with', () => {
    const room = createMergeRoom(10_000, 4_000);
    const responses: ModelMessage[] = [call('a'), result('a', 'switched')];
    room.take(100);
    room.rebase(1_000);
    // The responses and earlier merges still ride on every request; only the input changed.
    expect(room.left(responses)).toBe(10_000 - 1_000 - 100 - responseTokens(responses));
  });
});
