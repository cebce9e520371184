import { APICallError, RetryError } from 'ai';
import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import { isContextOverflowError } from '../../src/worker/agent/overflow.js';
import { compactionThreshold, selectCut } from '../../src/worker/compaction/cut.js';
import { serialise, TOOL_OUTPUT_MAX_CHARS, updatePrompt } from '../../src/worker/compaction/prompt.js';

const msg = (
  id: string,
  tokens: number,
  role: 'user' | 'assistant' = 'user',
  kind: 'normal' | 'summary' = 'normal',
): ChatMessage => ({
  id,
  role,
  parts: [{ type: 'text', text: `text of ${id}` }],
  metadata: { ts: 1, chatKey: 'c', kind, tokens },
});
const ids = (ms: ChatMessage[] | undefined) => (ms ?? []).map((m) => m.id);

describe('selectCut', () => {
  it('keeps the newest keepLast messages and summarises the rest', () => {
    const history = Array.from({ length: 10 }, (_, i) => msg(`m${i}`, 10));
    const cut = selectCut(history, { keepLast: 3, keepRecentTokens: 0 });
    expect(ids(cut?.replaced)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6']);
    expect(ids(cut?.kept)).toEqual(['m7', 'm8', 'm9']);
    expect(cut?.previousSummary).toBeUndefined();
  });

  it('keeps more than keepLast when the recent-token floor asks for it', () => {
    const history = Array.from({ length: 10 }, (_, i) => msg(`m${i}`, 10));
    const cut = selectCut(history, { keepLast: 2, keepRecentTokens: 45 });
    expect(ids(cut?.kept)).toEqual(['m5', 'm6', 'm7', 'm8', 'm9']);
  });

  it('carries the previous summary into the replaced head but not into the new messages', () => {
    const history = [
      msg('s', 50, 'assistant', 'summary'),
      ...Array.from({ length: 6 }, (_, i) => msg(`m${i}`, 10)),
    ];
    const cut = selectCut(history, { keepLast: 2, keepRecentTokens: 0 });
    expect(cut?.previousSummary?.id).toBe('s');
    expect(ids(cut?.replaced)).toEqual(['s', 'm0', 'm1', 'm2', 'm3']);
    expect(ids(cut?.newMessages)).toEqual(['m0', 'm1', 'm2', 'm3']);
  });

  it('finds nothing to cut when everything after the summary must be kept', () => {
    expect(selectCut([msg('a', 1), msg('b', 1)], { keepLast: 5, keepRecentTokens: 0 })).toBeUndefined();
    expect(
      selectCut([msg('s', 9, 'assistant', 'summary'), msg('a', 1)], { keepLast: 1, keepRecentTokens: 0 }),
    ).toBeUndefined();
    expect(selectCut([], { keepLast: 1, keepRecentTokens: 0 })).toBeUndefined();
  });

  it('never splits a single huge message: alone it is kept, behind newer ones it is cut whole', () => {
    expect(selectCut([msg('huge', 100_000)], { keepLast: 1, keepRecentTokens: 10 })).toBeUndefined();
    const cut = selectCut([msg('huge', 100_000), msg('a', 5), msg('b', 5)], {
      keepLast: 2,
      keepRecentTokens: 10,
    });
    expect(ids(cut?.replaced)).toEqual(['huge']);
  });
});

describe('update prompt', () => {
  it('shows the previous summary and only the new messages, as tagged text', () => {
    const summary: ChatMessage = {
      ...msg('s', 5, 'assistant', 'summary'),
      parts: [{ type: 'text', text: 'EARLIER FACTS' }],
    };
    const prompt = updatePrompt(summary, [msg('m1', 1), msg('m2', 1, 'assistant')]);
    expect(prompt).toContain('<previous-summary>\nEARLIER FACTS\n</previous-summary>');
    expect(prompt).toContain('[User]: text of m1');
    expect(prompt).toContain('[Assistant]: text of m2');
  });

  it('truncates tool outputs', () => {
    const withTool: ChatMessage = {
      ...msg('t', 1, 'assistant'),
      parts: [
        {
          type: 'tool-lookup',
          toolCallId: 'c',
          state: 'output-available',
          input: { q: 'x' },
          output: 'y'.repeat(10_000),
        } as never,
      ],
    };
    const text = serialise([withTool]);
    expect(text).toMatch(/^\[Tool lookup\]: input/);
    expect(text.length).toBeLessThan(TOOL_OUTPUT_MAX_CHARS * 2 + 200);
    expect(text).toContain('chars cut]');
  });
});

describe('isContextOverflowError', () => {
  const apiError = (statusCode: number, message: string, data?: unknown) =>
    new APICallError({
      message,
      url: 'http://x',
      requestBodyValues: {},
      statusCode,
      data,
      responseBody: message,
      isRetryable: false,
    });

  it('recognises the providers’ context-length refusals', () => {
    expect(isContextOverflowError(apiError(400, "This model's maximum context length is 8192 tokens"))).toBe(
      true,
    );
    expect(isContextOverflowError(apiError(400, 'prompt is too long: 200000 tokens'))).toBe(true);
    expect(isContextOverflowError(apiError(413, 'input exceeds the context window'))).toBe(true);
    expect(
      isContextOverflowError(apiError(422, 'weird', { error: { code: 'context_length_exceeded' } })),
    ).toBe(true);
  });

  it('unwraps a RetryError', () => {
    const inner = apiError(400, 'maximum context length exceeded');
    expect(
      isContextOverflowError(
        new RetryError({ message: 'failed', reason: 'maxRetriesExceeded', errors: [inner] }),
      ),
    ).toBe(true);
  });

  it('does not mistake other failures for an overflow', () => {
    expect(isContextOverflowError(apiError(500, 'maximum context length'))).toBe(false);
    expect(isContextOverflowError(apiError(400, 'invalid tool schema'))).toBe(false);
    expect(isContextOverflowError(new Error('maximum context length'))).toBe(false);
  });
});

describe('compactionThreshold', () => {
  it('is the lower of COMPACT_AT_TOKENS and 80 % of the message budget', () => {
    expect(compactionThreshold(5000, 11_000)).toBe(5000);
    expect(compactionThreshold(9600, 11_000)).toBe(8800);
  });

  it('follows the message budget when a long system prompt leaves less room, so compaction starts before the hard cut', () => {
    expect(compactionThreshold(9600, 6000)).toBe(4800);
    expect(compactionThreshold(9600, 0)).toBe(1);
  });
});
