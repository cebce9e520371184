import { readFileSync } from 'node:fs';
import { countTokens as rawCount } from 'gpt-tokenizer';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import { hostileTexts, prng } from '../helpers/hostile-text.js';

// Every string the tokenizer is handed, to prove none is longer than a slice.
const seen = vi.hoisted(() => ({ lengths: [] as number[] }));
vi.mock('../../src/shared/bpe-count.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/shared/bpe-count.js')>();
  return {
    ...real,
    countTokens: (text: string) => {
      seen.lengths.push(text.length);
      return real.countTokens(text);
    },
  };
});

// The unit project shares modules between files (`isolate: false`): an earlier file may have
// loaded tokens.ts against the real tokenizer, so these are loaded afresh, after the mock.
vi.resetModules();
const { modelView } = await import('../../src/shared/model-view.js');
const {
  countTextTokens,
  countTextTokensAsync,
  HARD_CUT_MARGIN,
  messageTokens,
  TOKENIZER_SLICE_CHARS,
  TOKENIZER_YIELD_BYTES,
  viewTokens,
  withTokens,
} = await import('../../src/shared/tokens.js');
const { TokenBudgetCompressor } = await import('../../src/worker/pipeline/compressor.js');

beforeEach(() => {
  seen.lengths.length = 0;
});

const message = (text: string, extra: Partial<ChatMessage> = {}): ChatMessage => ({
  id: 'm',
  role: 'user',
  parts: [{ type: 'text', text }],
  metadata: { ts: 1, chatKey: 'c', kind: 'normal' },
  ...extra,
});

describe('countTextTokens', () => {
  it('never hands the tokenizer more than a slice, however long a run without spaces is', () => {
    for (const [shape, text] of Object.entries(hostileTexts(100_000))) {
      seen.lengths.length = 0;
      const count = countTextTokens(text);
      expect(count, shape).toBeGreaterThan(0);
      expect(Math.max(...seen.lengths), shape).toBeLessThanOrEqual(TOKENIZER_SLICE_CHARS);
      // Every character went through the tokenizer exactly once.
      expect(
        seen.lengths.reduce((a, b) => a + b, 0),
        shape,
      ).toBe(text.length);
    }
  });

  it('counts prose exactly as the tokenizer counts it whole', () => {
    // Every slice of prose ends before a space: no hard cut, so no margin and no difference.
    const prose = hostileTexts(50_000, 5).englishProse!;
    expect(countTextTokens(prose)).toBe(rawCount(prose));
    // Real documentation (tables, code, long paths) has a few runs without a space: a hard
    // cut there adds its margin, so the count is at or a little above the whole count.
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    expect(countTextTokens(readme)).toBeGreaterThanOrEqual(rawCount(readme));
    expect(countTextTokens(readme)).toBeLessThanOrEqual(rawCount(readme) * 1.01);
  });

  it('never counts fewer tokens than the tokenizer counts pathological text whole', () => {
    // Small enough for the quadratic whole count to finish quickly.
    const cases = Object.entries(hostileTexts(3000, 7));
    // Periodic and random strings over a few symbols: where BPE is least monotonic under a cut.
    const rand = prng(11);
    const symbols = Array.from(' \t\n.,-=+*#/!?:;()[]{}<>"_~|abcxyzé01日本😀\u0301\u00a0');
    for (let i = 0; i < 150; i++) {
      const alphabet = Array.from(
        { length: 1 + Math.floor(rand() * 4) },
        () => symbols[Math.floor(rand() * symbols.length)]!,
      );
      const periodic = rand() < 0.5;
      let text = '';
      while (text.length < 1200)
        text += periodic ? alphabet.join('') : alphabet[Math.floor(rand() * alphabet.length)];
      cases.push([`${JSON.stringify(alphabet.join(''))}${periodic ? ' periodic' : ''}`, text]);
    }
    for (const [shape, text] of cases) {
      const whole = rawCount(text, { disallowedSpecial: new Set() });
      const sliced = countTextTokens(text);
      expect(sliced, shape).toBeGreaterThanOrEqual(whole);
      // Each hard cut costs at most a few tokens: the count stays a close estimate.
      const cuts = Math.ceil(text.length / (TOKENIZER_SLICE_CHARS / 2));
      expect(sliced, shape).toBeLessThanOrEqual(whole + cuts * (HARD_CUT_MARGIN + 2));
    }
  });

  it('counts special-token text such as <|endoftext|> as plain text instead of throwing', () => {
    expect(() => rawCount('a <|endoftext|> b')).toThrow();
    expect(countTextTokens('a <|endoftext|> b')).toBeGreaterThan(3);
    expect(countTextTokens(`${'x '.repeat(200)}<|im_start|>system`)).toBeGreaterThan(200);
  });
});

describe('countTextTokensAsync', () => {
  it('gives the same count and returns to the event loop after every TOKENIZER_YIELD_BYTES', async () => {
    for (const [shape, text] of Object.entries(hostileTexts(50_000))) {
      let ticks = 0;
      let running = true;
      const tick = () => {
        ticks += 1;
        if (running) setImmediate(tick);
      };
      setImmediate(tick);
      const count = await countTextTokensAsync(text);
      running = false;
      expect(count, shape).toBe(countTextTokens(text));
      // One uninterrupted stretch covers at most TOKENIZER_YIELD_BYTES plus one slice (≤ 4 bytes a char).
      const stretch = TOKENIZER_YIELD_BYTES + 4 * TOKENIZER_SLICE_CHARS;
      expect(ticks, shape).toBeGreaterThanOrEqual(Math.floor(Buffer.byteLength(text) / stretch) - 1);
    }
  });
});

describe('message counts describe what the model receives', () => {
  it('counts a 100 KB message as its model view: at most maxChars of text reach the tokenizer', async () => {
    const huge = message('a'.repeat(100_000));
    const counted = await withTokens(huge, 4000);
    expect(seen.lengths.reduce((a, b) => a + b, 0)).toBeLessThan(4000 + 200);
    const view = modelView(huge, 4000).message;
    expect(counted.metadata.tokens).toBe(messageTokens(view));
    expect(counted.metadata.tokensMaxChars).toBe(4000);
    // The stored message keeps every character; only the count is of the view.
    expect(counted.parts).toEqual(huge.parts);
  });

  it('leaves tokensMaxChars unset when nothing was cut, and reuses a count that still fits', async () => {
    const short = await withTokens(message('hello there'), 4000);
    expect(short.metadata.tokensMaxChars).toBeUndefined();
    seen.lengths.length = 0;
    expect(await withTokens(short, 100)).toBe(short);
    expect(viewTokens(short, 100)).toBe(short.metadata.tokens);
    expect(seen.lengths).toEqual([]);
  });

  it('recounts when the cap changed, so a raised MAX_CHARS_PER_MESSAGE never leaves an undercount', async () => {
    const text = 'word '.repeat(2000);
    const at1000 = await withTokens(message(text), 1000);
    const at4000 = await withTokens(at1000, 4000);
    expect(at4000.metadata.tokens).toBeGreaterThan(at1000.metadata.tokens! * 3);
    expect(at4000.metadata.tokensMaxChars).toBe(4000);
    const whole = await withTokens(at4000, 100_000);
    expect(whole.metadata.tokensMaxChars).toBeUndefined();
    expect(whole.metadata.tokens).toBe(messageTokens(message(text)));
  });

  it('the compressor budgets a cut message by the same count the provider stored, without recounting', async () => {
    const stored = await withTokens(message('z'.repeat(50_000)), 4000);
    seen.lengths.length = 0;
    const { messages, report } = new TokenBudgetCompressor({ maxCharsPerMessage: 4000 }).compress(
      [stored],
      100_000,
    );
    expect(seen.lengths).toEqual([]);
    expect(report.truncatedCount).toBe(1);
    expect(messages[0]!.metadata.tokens).toBe(stored.metadata.tokens);
    // And that count is the count of exactly what is sent.
    expect(messages[0]!.metadata.tokens).toBe(
      messageTokens({ ...messages[0]!, metadata: { ...messages[0]!.metadata, tokens: undefined } }),
    );
  });
});
