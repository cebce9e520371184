import { readdirSync, readFileSync } from 'node:fs';
import { countTokens as gptCount } from 'gpt-tokenizer';
import bpeRanks from 'gpt-tokenizer/bpeRanks/o200k_base';
import o200k from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import { countTokens, rankCount, rankOf, tokenBytes } from '../../src/shared/bpe-count.js';
import { TOKENIZER_SLICE_CHARS } from '../../src/shared/tokens.js';
import { hostileTexts, prng } from '../helpers/hostile-text.js';

const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };
const utf8 = new TextEncoder();

// gpt-tokenizer's own byte lookup (private in its types), the reference for rankOf.
const gptCore = (o200k as unknown as { bytePairEncodingCoreProcessor: object })
  .bytePairEncodingCoreProcessor as {
  getBpeRankFromBytes(bytes: Uint8Array): number | undefined;
};

/** Pieces of `text` of every length up to a slice, as tokens.ts hands them over, plus a few whole. */
function slices(text: string, step: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += step) out.push(text.slice(i, i + TOKENIZER_SLICE_CHARS));
  return out;
}

function corpus(): Array<[string, string]> {
  const cases: Array<[string, string]> = [];
  const add = (shape: string, texts: string[]) => {
    for (const [i, text] of texts.entries()) cases.push([`${shape} #${i}`, text]);
  };
  for (const [shape, text] of Object.entries(hostileTexts(4000, 3))) {
    add(shape, slices(text, 61));
    add(`${shape} whole`, [text.slice(0, 600)]);
  }
  const root = new URL('../../', import.meta.url);
  // The README and the pages it was cut into: about as much Markdown as the README alone held.
  const markdown = [
    'README.md',
    'docs/http-api.md',
    'docs/agent.md',
    'docs/operations.md',
    'docs/platforms.md',
  ]
    .map((file) => readFileSync(new URL(file, root), 'utf8'))
    .join('\n');
  add('markdown', slices(markdown, 47));
  add('markdown whole', [readFileSync(new URL('docs/design.md', root), 'utf8').slice(0, 20_000)]);
  for (const file of readdirSync(new URL('src/shared/store/lua/', root)).slice(0, 3))
    add(`lua ${file}`, slices(readFileSync(new URL(`src/shared/store/lua/${file}`, root), 'utf8'), 53));
  add('typescript', slices(readFileSync(new URL('src/shared/tokens.ts', root), 'utf8'), 29));
  add('mixed scripts', [
    '日本語のテキストと English words, 中文字符，한국어 문장입니다。',
    'Здравствуйте, мир! Γειά σου Κόσμε! مرحبا بالعالم שלום עולם नमस्ते दुनिया',
    "I'm sure they'll say we've done it, DON'T YOU'LL SEE, O'Neil's",
    'numbers 1234567890 3.14159 1,000,000 ٣٤٥ ⅫⅣ ²³ 0x1F600',
  ]);
  add('emoji', [
    '👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵🇺🇸 ❤️‍🔥 🧑🏿‍💻 😀😃😄😁',
    'e\u0301 a\u0308 n\u0303 Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǵ̗͚o̹̻͛ (combining marks)',
  ]);
  // Byte-order marks and lone surrogates: where gpt-tokenizer's lookup has quirks to match.
  add('byte-order marks and surrogates', [
    '\uFEFFusing System;\n\uFEFFnamespace X',
    '\uFEFF',
    '\uFEFF\uFEFF\uFEFF',
    'a\uFEFFb \uFEFF// c \uFEFF#include \uFEFF\n\n',
    '\uD800 x\uDC00y \uD83D',
    '\uD83D\uD83D\uDE00 \uDE00\uD83D',
  ]);
  add('special-token text', ['<|endoftext|> <|im_start|>system<|im_sep|> <|fim_prefix|><|endofprompt|>']);
  add('whitespace', [' \t \n\r\n\u00a0\u2003\u3000  x  \n\n\n   y\t\t', '    \n    ', '\r\r\r\n\n']);
  const rand = prng(17);
  const symbols = Array.from(
    ' \t\n\r.,-=+*#/!?:;()[]{}<>"\'_~|abcXYZé01日本😀\u0301\u00a0\uFEFF\uD800\u200d\u00ad\u00ff€',
  );
  const random: string[] = [];
  for (let i = 0; i < 3000; i++) {
    let text = '';
    const length = 1 + Math.floor(rand() * 40);
    for (let j = 0; j < length; j++) text += symbols[Math.floor(rand() * symbols.length)];
    random.push(text);
  }
  add('random symbols', random);
  add(
    'random bytes',
    Array.from({ length: 300 }, () =>
      new TextDecoder().decode(Uint8Array.from({ length: 80 }, () => Math.floor(rand() * 256))),
    ),
  );
  return cases;
}

describe('countTokens (o200k counts without gpt-tokenizer in memory)', () => {
  it("counts every text of a varied corpus exactly as gpt-tokenizer's countTokens", () => {
    const cases = corpus();
    expect(cases.length).toBeGreaterThan(4000);
    const wrong = cases
      .map(([shape, text]) => ({ shape, text, want: gptCount(text, PLAIN_TEXT), got: countTokens(text) }))
      .filter(({ want, got }) => want !== got);
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it('holds the bytes of every o200k rank gpt-tokenizer holds, and looks them up as it does', () => {
    expect(rankCount()).toBe(bpeRanks.length);
    const mismatched: number[] = [];
    const lookups: number[] = [];
    for (const [rank, entry] of bpeRanks.entries()) {
      const bytes = typeof entry === 'string' ? utf8.encode(entry) : Uint8Array.from(entry);
      if (!Buffer.from(tokenBytes(rank)).equals(Buffer.from(bytes))) mismatched.push(rank);
      // The token's bytes, a byte-order mark before them, and the bytes less their last.
      for (const key of [bytes, Uint8Array.of(0xef, 0xbb, 0xbf, ...bytes), bytes.subarray(0, -1)])
        if (rankOf(key) !== gptCore.getBpeRankFromBytes(key)) lookups.push(rank);
    }
    expect(mismatched).toEqual([]);
    expect(lookups).toEqual([]);
  });
});
