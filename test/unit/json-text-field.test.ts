import { describe, expect, it } from 'vitest';
import { JsonTextField } from '../../src/worker/agent/stream/json-text-field.js';

/** Feeds `json` in the given pieces; returns what each piece added. */
function read(pieces: string[], field = 'text'): string[] {
  const reader = new JsonTextField(field);
  return pieces.map((p) => reader.push(p));
}

/** Cuts `s` at the given offsets. */
function cut(s: string, at: number[]): string[] {
  const out: string[] = [];
  let from = 0;
  for (const i of [...at].sort((a, b) => a - b)) {
    out.push(s.slice(from, i));
    from = i;
  }
  out.push(s.slice(from));
  return out;
}

// A deterministic generator: the test must fail the same way each time it fails.
function rng(seed: number) {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

const HARD_TEXTS = [
  'hello "world"\nbye',
  'tab\there, back\\slash, slash/ and \u0001 control',
  'emoji 😀 and 🇩🇪 flags, accents é ü, CJK 漢字',
  '{"looks": ["like", "json"]} , "text": "nope"',
  '',
  'a'.repeat(300),
];

describe('JsonTextField', () => {
  it('reads the field’s decoded text however the input is cut, in order and exactly once', () => {
    const random = rng(7);
    for (const text of HARD_TEXTS) {
      for (const input of [
        JSON.stringify({ text }),
        JSON.stringify({ before: { text: 'nested, not this' }, list: ['text', 1], text, after: 'x' }),
        // Python-style spacing and \u escapes for every non-ASCII character.
        `{ "n" : 1 , "text" : ${JSON.stringify(text).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)} }`,
      ]) {
        for (let trial = 0; trial < 40; trial++) {
          const at = Array.from({ length: Math.floor(random() * 12) }, () =>
            Math.floor(random() * input.length),
          );
          const pieces = cut(input, at);
          const added = read(pieces);
          expect(added.join(''), `${input} cut at ${at}`).toBe(text);
        }
      }
    }
  });

  it('shows text as it arrives, holding back only an unfinished escape or half a surrogate pair', () => {
    expect(read(['{"text":"ab', 'c\\', 'nd\\u00', 'e9f'])).toEqual(['ab', 'c', '\nd', 'éf']);
    expect(read(['{"text":"x\ud83d', '\ude00y"}'])).toEqual(['x', '😀y']);
  });

  it('reads only the first top-level occurrence, and nothing for a value that is not a string', () => {
    expect(read(['{"text":"one","text":"two"}']).join('')).toBe('one');
    expect(read(['{"text":42,"other":"no"}']).join('')).toBe('');
    expect(read(['{"text":null}']).join('')).toBe('');
    expect(read(['["text","no"]']).join('')).toBe('');
    expect(read(['{"a":{"text":"inner"}}']).join('')).toBe('');
  });

  it('keys are compared decoded', () => {
    expect(read(['{"t\\u0065xt":"yes"}']).join('')).toBe('yes');
  });
});
