import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import { messageText } from '../../src/shared/messages.js';
import { messageTokens } from '../../src/shared/tokens.js';
import {
  SimpleCompressor,
  shouldReport,
  TokenBudgetCompressor,
} from '../../src/worker/pipeline/compressor.js';

interface MsgOptions {
  role?: ChatMessage['role'];
  kind?: 'normal' | 'summary';
  tokens?: number;
}

function msg(id: string, text: string, options: MsgOptions = {}): ChatMessage {
  const metadata: ChatMessage['metadata'] = { ts: 1, chatKey: 't', kind: options.kind ?? 'normal' };
  if (options.tokens !== undefined) metadata.tokens = options.tokens;
  return { id, role: options.role ?? 'user', parts: [{ type: 'text', text }], metadata };
}

function ids(messages: ChatMessage[]): string[] {
  return messages.map((m) => m.id);
}

/** Ten messages of 10 tokens each, so budgets read as message counts. */
function history(count = 10): ChatMessage[] {
  return Array.from({ length: count }, (_, i) => msg(`m${i}`, `text ${i}`, { tokens: 10 }));
}

const unlimited = Number.POSITIVE_INFINITY;

describe('SimpleCompressor', () => {
  it('keeps only the last keepLast messages, in order', () => {
    const { messages, report } = new SimpleCompressor({
      keepLast: 3,
      maxCharsPerMessage: unlimited,
    }).compress(history(), 1000);
    expect(ids(messages)).toEqual(['m7', 'm8', 'm9']);
    expect(report).toMatchObject({ originalCount: 10, keptCount: 3, originalTokens: 100, keptTokens: 30 });
  });

  it('reports the budget but cuts only by count', () => {
    const { messages, report } = new SimpleCompressor({
      keepLast: 5,
      maxCharsPerMessage: unlimited,
    }).compress(history(), 15);
    expect(messages).toHaveLength(5);
    expect(report).toMatchObject({ budget: 15, keptTokens: 50, overBudget: true });
  });

  it('truncates long text with a marker and leaves the input message untouched', () => {
    const original = msg('a', 'x'.repeat(50), { tokens: 999 });
    const snapshot = structuredClone(original);
    const { messages, report } = new SimpleCompressor({ keepLast: 5, maxCharsPerMessage: 10 }).compress(
      [original],
      1000,
    );
    expect(messageText(messages[0]!)).toBe(`${'x'.repeat(10)}… [truncated 40 chars]`);
    expect(original).toEqual(snapshot);
    expect(messages[0]).not.toBe(original);
    expect(report.truncatedCount).toBe(1);
  });

  it('keeps a leading summary first in addition to the last N', () => {
    const input = [msg('s', 'summary', { kind: 'summary', tokens: 10 }), ...history()];
    const { messages } = new SimpleCompressor({ keepLast: 2, maxCharsPerMessage: unlimited }).compress(
      input,
      1,
    );
    expect(ids(messages)).toEqual(['s', 'm8', 'm9']);
  });

  it('rejects a keepLast that would drop the message being answered', () => {
    expect(() => new SimpleCompressor({ keepLast: 0, maxCharsPerMessage: 10 })).toThrow(RangeError);
  });
});

describe('TokenBudgetCompressor', () => {
  const compressor = new TokenBudgetCompressor({ maxCharsPerMessage: unlimited });

  it('walks back from the newest message while the budget holds, keeping order', () => {
    const { messages, report } = compressor.compress(history(), 35);
    expect(ids(messages)).toEqual(['m7', 'm8', 'm9']);
    expect(report).toMatchObject({ originalCount: 10, keptCount: 3, keptTokens: 30, budget: 35 });
    expect(report.overBudget).toBe(false);
  });

  it('never splits a message and stops at the first one that does not fit', () => {
    const input = [
      msg('small', 'a', { tokens: 1 }),
      msg('big', 'b', { tokens: 50 }),
      msg('new', 'c', { tokens: 10 }),
    ];
    const { messages } = compressor.compress(input, 30);
    // 'small' would fit on its own, but keeping it would leave a gap where 'big' was.
    expect(ids(messages)).toEqual(['new']);
    expect(messageText(messages[0]!)).toBe('c');
  });

  it('keeps the leading summary first, reserving its tokens, even when the budget is tiny', () => {
    const input = [msg('s', 'summary', { kind: 'summary', tokens: 20 }), ...history()];
    expect(ids(compressor.compress(input, 45).messages)).toEqual(['s', 'm8', 'm9']);
    expect(ids(compressor.compress(input, 1).messages)).toEqual(['s', 'm9']);
  });

  it('keeps the newest message even when it alone exceeds the budget, and flags it', () => {
    const input = [msg('old', 'a', { tokens: 5 }), msg('huge', 'b', { tokens: 500 })];
    const { messages, report } = compressor.compress(input, 100);
    expect(ids(messages)).toEqual(['huge']);
    expect(report).toMatchObject({ keptCount: 1, keptTokens: 500, budget: 100, overBudget: true });
  });

  it('uses cached metadata.tokens instead of re-tokenizing', () => {
    // The text is two characters, so only the cached count can make it too big.
    const input = [msg('fat', 'hi', { tokens: 1000 }), msg('new', 'ok', { tokens: 5 })];
    const { messages, report } = compressor.compress(input, 100);
    expect(ids(messages)).toEqual(['new']);
    expect(report.originalTokens).toBe(1005);
  });

  it('recomputes the token count of a truncated message from its new content', () => {
    const original = msg('a', 'word '.repeat(400), { tokens: 9999 });
    const snapshot = structuredClone(original);
    const { messages, report } = new TokenBudgetCompressor({ maxCharsPerMessage: 20 }).compress(
      [original],
      1000,
    );
    const out = messages[0]!;
    expect(messageText(out)).toMatch(/… \[truncated 1980 chars\]$/);
    expect(out.metadata.tokens).toBe(
      messageTokens({ ...out, metadata: { ...out.metadata, tokens: undefined } }),
    );
    expect(out.metadata.tokens).toBeLessThan(50);
    expect(report).toMatchObject({ truncatedCount: 1, keptTokens: out.metadata.tokens });
    expect(original).toEqual(snapshot);
  });

  it('caps all text parts of a message together', () => {
    const input = msg('a', 'abcdef');
    input.parts.push({ type: 'text', text: 'ghijkl' });
    const { messages } = new TokenBudgetCompressor({ maxCharsPerMessage: 8 }).compress([input], 1000);
    expect(messages[0]!.parts).toEqual([
      { type: 'text', text: 'abcdef' },
      { type: 'text', text: 'gh… [truncated 4 chars]' },
    ]);
  });
});

describe.each([
  ['SimpleCompressor', new SimpleCompressor({ keepLast: 3, maxCharsPerMessage: 10 })],
  ['TokenBudgetCompressor', new TokenBudgetCompressor({ maxCharsPerMessage: 10 })],
])('%s (shared contract)', (_name, compressor) => {
  it('turns empty input into empty output and a zero report', () => {
    const { messages, report } = compressor.compress([], 100);
    expect(messages).toEqual([]);
    expect(report).toEqual({
      originalCount: 0,
      keptCount: 0,
      originalTokens: 0,
      keptTokens: 0,
      budget: 100,
      truncatedCount: 0,
      overBudget: false,
    });
    expect(shouldReport(report)).toBe(false);
  });

  it('returns the same messages when nothing needs cutting', () => {
    const input = history(3);
    const { messages, report } = compressor.compress(input, 1000);
    expect(messages).toEqual(input);
    for (const [i, m] of messages.entries()) expect(m).toBe(input[i]);
    expect(report.keptCount).toBe(report.originalCount);
    expect(shouldReport(report)).toBe(false);
  });

  it('reports when it cut or truncated', () => {
    expect(shouldReport(compressor.compress(history(), 25).report)).toBe(true);
    expect(shouldReport(compressor.compress([msg('a', 'x'.repeat(20))], 1000).report)).toBe(true);
  });

  it('never throws on odd parts and leaves non-text parts alone', () => {
    const toolPart = {
      type: 'tool-search',
      toolCallId: 'c1',
      state: 'output-available',
      input: { q: 'x'.repeat(50) },
      output: { hits: 3 },
    };
    const filePart = { type: 'file', mediaType: 'image/png', url: 'data:image/png;base64,AAAA' };
    const odd = {
      id: 'odd',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        toolPart,
        filePart,
        { type: 'text' },
        { type: 'text', text: 'y'.repeat(30) },
      ],
      metadata: { ts: 1, chatKey: 't', kind: 'normal' },
    } as unknown as ChatMessage;
    const broken = {
      id: 'broken',
      role: 'user',
      metadata: { ts: 1, chatKey: 't' },
    } as unknown as ChatMessage;
    const nullish = null as unknown as ChatMessage;

    const result = compressor.compress([odd, broken, nullish, msg('new', 'fine')], 1000);
    expect(result.report.originalCount).toBe(4);
    expect(() => compressor.compress([broken], Number.NaN)).not.toThrow();

    const { messages } = compressor.compress([odd], 1000);
    const parts = messages[0]!.parts as unknown[];
    expect(parts.slice(0, 4)).toEqual([{ type: 'step-start' }, toolPart, filePart, { type: 'text' }]);
    expect(parts[4]).toEqual({ type: 'text', text: `${'y'.repeat(10)}… [truncated 20 chars]` });
  });
});
