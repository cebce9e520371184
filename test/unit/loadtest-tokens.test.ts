import { describe, expect, it } from 'vitest';
import { ChatState, turnTokens } from '../../src/loadtest/chat-state.js';

describe('loadtest: tokens per turn', () => {
  it('sums a turn.committed event over its calls, and falls back to its totals', () => {
    expect(
      turnTokens({
        calls: [
          { m: 'a', i: 1000, c: 900, w: 0, o: 20, r: 0 },
          { m: 'b', i: 1100, c: 1000, w: 50, o: 5, r: 0 },
        ],
      }),
    ).toEqual({ input: 2100, cachedInput: 1900, output: 25 });
    expect(turnTokens({ inputTokens: 30, outputTokens: 4 })).toEqual({
      input: 30,
      cachedInput: 0,
      output: 4,
    });
    expect(turnTokens({ consumed: 1 })).toBeUndefined();
  });

  it('keeps each committed turn’s tokens, once per event', () => {
    const chat = new ChatState(0, 'c');
    const event = {
      id: '5-0',
      type: 'turn.committed',
      ts: 5,
      data: { consumed: 1, calls: [{ i: 10, c: 4, o: 2 }] },
    };
    chat.applyEvents([event]);
    chat.applyEvents([event]);
    expect(chat.commits.map((c) => c.tokens)).toEqual([{ input: 10, cachedInput: 4, output: 2 }]);
  });
});
