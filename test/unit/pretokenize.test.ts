import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';
import { describe, expect, it } from 'vitest';
import { pieceEnd } from '../../src/shared/pretokenize.js';
import { prng } from '../helpers/hostile-text.js';

const regexPieces = (text: string) => Array.from(text.matchAll(O200K_TOKEN_SPLIT_REGEX), (m) => m[0]);

function pieces(text: string): string[] {
  const out: string[] = [];
  for (let start = 0; start < text.length; ) {
    const end = pieceEnd(text, start);
    out.push(text.slice(start, end));
    start = end;
  }
  return out;
}

// Every ASCII class the hand-written path tells apart, the contractions, and characters beyond
// ASCII of each class the regex knows (letters of each case, marks, other numbers, Unicode
// spaces, a format character, emoji, lone surrogates), where it must hand over to the regex.
const ASCII_ATOMS = [
  ...'aAzZ09 \t\n\r\v\f\x00\x1f\x7f!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~',
  "'s",
  "'S",
  "'ll",
  "'lL",
  "'Ve",
  "'re",
  "'d",
  "'m",
  "'t",
  "'x",
  'ab',
  'CD',
  '1234',
  '  ',
  '\n\n',
  '//',
];
const OTHER_ATOMS = [
  ...['é', 'É', 'ǅ', 'ʰ', '日', '\u0301', '٣', '²', '\u00a0', '\u2028', '\u3000', '\uFEFF', '\u0085'],
  ...['😀', '\uD800', '\uDC00', '€', '—'],
];

describe('pieceEnd (the o200k pre-tokenizer)', () => {
  it("splits random mixed text into exactly the regex's pieces", () => {
    const rand = prng(23);
    const wrong: Array<{ text: string; want: string[]; got: string[] }> = [];
    for (let i = 0; i < 60_000; i++) {
      // Half the strings ASCII only, half with characters beyond it mixed in.
      const atoms = i % 2 === 0 ? ASCII_ATOMS : [...ASCII_ATOMS, ...OTHER_ATOMS];
      let text = '';
      const length = 1 + Math.floor(rand() * 20);
      for (let j = 0; j < length; j++) text += atoms[Math.floor(rand() * atoms.length)];
      const want = regexPieces(text);
      const got = pieces(text);
      if (got.join('\u0000') !== want.join('\u0000')) wrong.push({ text, want, got });
    }
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it('splits code, prose and whitespace runs as the regex does, slashes after newlines included', () => {
    for (const text of [
      "const x = 'a';\n\n// comment\n\n/** doc */\nfunction f() {}\n",
      "I'm sure they'll say we've done it, DON'T YOU'LL SEE HELLOworld ABc",
      '  \t  x\n\n\n   y\t\t\n',
      '12345 1,000.50 x2 abc123def',
      'café naïve ÉCOLE 日本語 😀👍🏽 a\u00a0b',
    ])
      expect(pieces(text)).toEqual(regexPieces(text));
  });
});
