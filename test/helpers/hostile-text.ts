/** A small deterministic PRNG, so every run sees the same texts. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const WORDS =
  'the of and to in is you that it he was for on are as with his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part'.split(
    ' ',
  );

/**
 * Text shapes that defeat byte-pair encoding — long pieces without a space, many distinct
 * pairs, multi-byte characters — plus English prose as the ordinary case. Each is about
 * `chars` UTF-16 units.
 */
export function hostileTexts(chars: number, seed = 1): Record<string, string> {
  const rand = prng(seed);
  const pick = (alphabet: string) => alphabet[Math.floor(rand() * alphabet.length)]!;
  const many = (n: number, f: () => string) => Array.from({ length: n }, f).join('');
  let prose = '';
  while (prose.length < chars)
    prose += `${WORDS[Math.floor(rand() * WORDS.length)]}${rand() < 0.08 ? '. ' : ' '}`;
  return {
    englishProse: prose.slice(0, chars),
    repeatedChar: 'a'.repeat(chars),
    noSpaces: many(chars, () => pick('abcdefghijklmnopqrstuvwxyz')),
    punctuation: many(chars, () => pick('!#$%&*+-/<=>?@^_|~')),
    randomBytes: new TextDecoder().decode(Uint8Array.from({ length: chars }, () => Math.floor(rand() * 256))),
    cjk: many(chars, () => String.fromCharCode(0x4e00 + Math.floor(rand() * 20_000))),
    emoji: many(chars / 2, () => String.fromCodePoint(0x1f600 + Math.floor(rand() * 80))),
    whitespace: ' \t'.repeat(chars / 2),
  };
}
