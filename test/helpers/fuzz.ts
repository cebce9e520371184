import { randomInt } from 'node:crypto';

/**
 * Seeded random input for fuzz tests. The seed is `FUZZ_SEED` when set, else a new one per
 * run; a failing test names it in its message, and `FUZZ_SEED=<seed> npx vitest run <file>`
 * replays the same inputs.
 */
export function fuzzSeed(): number {
  const fixed = process.env.FUZZ_SEED;
  return fixed !== undefined && /^\d+$/.test(fixed) ? Number(fixed) >>> 0 : randomInt(2 ** 31);
}

/** mulberry32: small, fast, and the same sequence for the same seed on every platform. */
export class Fuzz {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /** `length` characters drawn from `alphabet` (code points, so astral characters stay whole). */
  text(length: number, alphabet: string): string {
    const chars = [...alphabet];
    let out = '';
    for (let i = 0; i < length; i++) out += this.pick(chars);
    return out;
  }

  digits(min: number, max: number): string {
    return this.text(min + this.int(max - min + 1), '0123456789');
  }
}

/** The largest stream id and the cursor made of it: what Redis refuses to range past. */
export const MAX_STREAM_ID = '18446744073709551615-18446744073709551615';
export const MAX_STREAM_CURSOR = `0-0.${MAX_STREAM_ID}`;

/** Characters that break parsers: separators, quotes, escapes, controls, other scripts' digits. */
export const HOSTILE_CHARS =
  'aZ09-._:@/\\?#%&=+*$>(){}[]<>"\'`|;, \t\u0000\u0001\u007f\u00a0\u00e9\u0661\uff11\u200b\ud83d\ude00\ufffd';

/** Numbers as text, weighted to the edges of 32, 53 and 64 bits. */
const EDGE_INTEGERS = [
  '0',
  '1',
  '9',
  '00',
  '01',
  '4294967295',
  '4294967296',
  '9007199254740991',
  '9007199254740992',
  '9223372036854775807',
  '9223372036854775808',
  '18446744073709551614',
  '18446744073709551615',
  '18446744073709551616',
  '99999999999999999999',
  '100000000000000000000',
  '00000000000000000000',
  '000000000000000000001',
  '-0',
  '-1',
  '+1',
  '1e3',
  '1e300',
  '1.5',
  '0x10',
  'NaN',
  'Infinity',
  '\u0661',
  '\uff11',
  ' 1',
  '1 ',
  '',
];

export function integerText(f: Fuzz): string {
  return f.chance(0.6) ? f.pick(EDGE_INTEGERS) : f.digits(1, 22);
}

/** A Redis stream id `<ms>-<seq>` most of the time, near misses otherwise. */
export function streamIdText(f: Fuzz): string {
  switch (f.int(8)) {
    case 0:
      return f.pick([
        MAX_STREAM_ID,
        '*',
        '$',
        '>',
        '-',
        '+',
        '0-0',
        '0',
        '-0',
        '1-',
        '-1',
        '1-*',
        '(1-0',
        '1--1',
      ]);
    case 1:
      return `${integerText(f)}-${integerText(f)}-${integerText(f)}`;
    case 2:
      return f.text(1 + f.int(30), HOSTILE_CHARS);
    default:
      return `${integerText(f)}-${integerText(f)}`;
  }
}

/** A live stream's cursor `<outbox id>.<events id>` most of the time, near misses otherwise. */
export function streamCursorText(f: Fuzz): string {
  switch (f.int(8)) {
    case 0:
      return f.chance(0.5)
        ? streamIdText(f)
        : f.pick([MAX_STREAM_CURSOR, `${MAX_STREAM_ID}.${MAX_STREAM_ID}`]);
    case 1:
      return `${streamIdText(f)}.${streamIdText(f)}.${streamIdText(f)}`;
    case 2:
      return `${f.pick([' ', '\t', ''])}${streamIdText(f)}.${streamIdText(f)}${f.pick([' ', '\t', ''])}`;
    case 3:
      return f.text(1 + f.int(120), HOSTILE_CHARS);
    default:
      return `${streamIdText(f)}.${streamIdText(f)}`;
  }
}
