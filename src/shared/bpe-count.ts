import { isUtf8 } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pieceEnd } from './pretokenize.js';

/**
 * o200k_base token counts, exactly as gpt-tokenizer 3.4's `countTokens(text, { disallowedSpecial:
 * new Set() })` gives them, at a fraction of its memory.
 *
 * gpt-tokenizer's encoding module costs a process ~60 MB of RSS: a 2.2 MB JS source of 200,000
 * string literals that V8 parses and keeps, the strings themselves, a string-keyed Map over
 * them, a decoder table and a 100,000-piece merge cache — most of it for encoding and decoding,
 * which chatlane never does. Counting needs only "which rank has these bytes". So the ranks are
 * read once from the same package's `data/o200k_base.tiktoken` (the file its JS module is
 * generated from; test/unit/bpe-count.test.ts checks every rank against that module) into three
 * typed arrays off the JS heap: the token bytes end to end, where each token starts, and an
 * open-addressing hash of byte strings to ranks (~4 MB in all). The pieces are those of
 * gpt-tokenizer's pre-tokenizer regex (pretokenize.ts), and the merge is its `bytePairMerge`,
 * step for step.
 *
 * Its quirks are kept on purpose, because the counts must not move:
 * - A byte string is looked up by decoding it, and the decoder drops a leading byte-order mark
 *   (EF BB BF): a valid UTF-8 string that starts with one is looked up without it, and the nine
 *   o200k tokens that start with one are never found (gpt-tokenizer stores them as byte arrays
 *   that no valid UTF-8 lookup reaches).
 * - A whole piece is first looked up as a string, without that stripping.
 * - A lone surrogate is encoded as U+FFFD before merging, so such a piece is never a whole token.
 * Special-token text such as `<|endoftext|>` is plain text here, as with that option.
 */

const RANKS_FILE = 'gpt-tokenizer/data/o200k_base.tiktoken';
/** No rank: higher than any real one, so the merge loop never picks it. */
const NONE = 0x7fffffff;

interface RankTable {
  /** Every token's bytes, in rank order. */
  bytes: Uint8Array;
  /** Token r is bytes[starts[r]] … bytes[starts[r + 1] - 1]. */
  starts: Uint32Array;
  /** Open addressing: rank + 1, 0 = empty. */
  slots: Int32Array;
  mask: number;
}

let table: RankTable | undefined;

/** The rank table, built on first use (0.15–0.3 s on a loaded 2-vCPU box; importing gpt-tokenizer took 0.4–0.5 s). */
function ranks(): RankTable {
  table ??= loadRanks(readFileSync(createRequire(import.meta.url).resolve(RANKS_FILE)));
  return table;
}

const B64 = new Int8Array(128).fill(-1);
for (const [i, c] of Array.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/').entries())
  B64[c.charCodeAt(0)] = i;

/** Decodes the base64 in raw[from, to) into out at `at`; returns the new end in out. */
function decodeBase64(raw: Uint8Array, from: number, to: number, out: Uint8Array, at: number): number {
  let bits = 0;
  let nbits = 0;
  for (let i = from; i < to; i++) {
    const c = raw[i]!;
    if (c === 0x3d) break; // '=' padding
    const v = c < 128 ? B64[c]! : -1;
    if (v < 0) throw new Error(`${RANKS_FILE}: not base64 at byte ${i}`);
    bits = ((bits << 6) | v) & 0xffffff;
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out[at++] = (bits >> nbits) & 0xff;
    }
  }
  return at;
}

/** `<base64 bytes> <rank>` per line, ranks 0, 1, 2, … in order (the tiktoken format). */
function loadRanks(raw: Uint8Array): RankTable {
  // First pass: how many tokens and how many bytes they decode to, so nothing is sized twice.
  let lines = 0;
  let size = 0;
  let digits = 0;
  let inKey = true;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === 0x0a) {
      lines++;
      size += (digits * 3) >> 2;
      digits = 0;
      inKey = true;
    } else if (c === 0x20) inKey = false;
    else if (inKey && c !== 0x3d) digits++;
  }
  if (digits > 0) throw new Error(`${RANKS_FILE}: no newline at the end`);
  let slots = 1;
  while (slots < lines * 2) slots <<= 1;
  const t: RankTable = {
    bytes: new Uint8Array(size),
    starts: new Uint32Array(lines + 1),
    slots: new Int32Array(slots),
    mask: slots - 1,
  };
  let end = 0;
  let rank = 0;
  for (let pos = 0; pos < raw.length; rank++) {
    let space = pos;
    while (space < raw.length && raw[space] !== 0x20) space++;
    let eol = space + 1;
    let value = 0;
    for (; eol < raw.length && raw[eol] !== 0x0a; eol++) value = value * 10 + raw[eol]! - 0x30;
    if (space >= raw.length || value !== rank)
      throw new Error(`${RANKS_FILE}: expected rank ${rank} on its line`);
    t.starts[rank] = end;
    end = decodeBase64(raw, pos, space, t.bytes, end);
    t.starts[rank + 1] = end;
    // A token that loses its byte-order mark on lookup is never found (see above).
    if (!losesBom(t.bytes, t.starts[rank]!, end)) insert(t, rank);
    pos = eol + 1;
  }
  return t;
}

/**
 * gpt-tokenizer looks a byte string up by decoding it, which drops a leading byte-order mark
 * from valid UTF-8 (see above). isUtf8 is strict (no overlong forms, no surrogates, nothing
 * above U+10FFFF) as that decoder is.
 */
function losesBom(b: Uint8Array, s: number, e: number): boolean {
  return e - s >= 3 && b[s] === 0xef && b[s + 1] === 0xbb && b[s + 2] === 0xbf && isUtf8(b.subarray(s, e));
}

function hash(b: Uint8Array, s: number, e: number): number {
  let h = 0x811c9dc5;
  for (let i = s; i < e; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
  return h >>> 0;
}

function insert(t: RankTable, rank: number): void {
  const s = t.starts[rank]!;
  const e = t.starts[rank + 1]!;
  let slot = hash(t.bytes, s, e) & t.mask;
  while (t.slots[slot] !== 0) slot = (slot + 1) & t.mask;
  t.slots[slot] = rank + 1;
}

/** The rank whose bytes are exactly b[s, e), or NONE. */
function find(t: RankTable, b: Uint8Array, s: number, e: number): number {
  const len = e - s;
  if (len <= 0) return NONE;
  for (let slot = hash(b, s, e) & t.mask; ; slot = (slot + 1) & t.mask) {
    const entry = t.slots[slot]!;
    if (entry === 0) return NONE;
    const ts = t.starts[entry - 1]!;
    if (t.starts[entry]! - ts !== len) continue;
    let i = 0;
    while (i < len && t.bytes[ts + i] === b[s + i]) i++;
    if (i === len) return entry - 1;
  }
}

/** gpt-tokenizer's `getBpeRankFromBytes`: a valid UTF-8 key loses a leading byte-order mark. */
function rankOfBytes(t: RankTable, b: Uint8Array, s: number, e: number): number {
  return find(t, b, losesBom(b, s, e) ? s + 3 : s, e);
}

// Scratch buffers, grown on demand: a piece is at most a few hundred bytes here.
let buf = new Uint8Array(512);
let partStarts = new Int32Array(513);
let partRanks = new Int32Array(513);

/** UTF-8 of text[start, end) into buf, a lone surrogate as U+FFFD (as TextEncoder); negative length if there was one. */
function encode(text: string, start: number, end: number): number {
  if (buf.length < (end - start) * 3) buf = new Uint8Array((end - start) * 3);
  let n = 0;
  let lossy = false;
  for (let i = start; i < end; i++) {
    let c = text.charCodeAt(i);
    if (c < 0x80) {
      buf[n++] = c;
      continue;
    }
    if (c < 0x800) {
      buf[n++] = 0xc0 | (c >> 6);
      buf[n++] = 0x80 | (c & 0x3f);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const d = i + 1 < end ? text.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        buf[n++] = 0xf0 | (cp >> 18);
        buf[n++] = 0x80 | ((cp >> 12) & 0x3f);
        buf[n++] = 0x80 | ((cp >> 6) & 0x3f);
        buf[n++] = 0x80 | (cp & 0x3f);
        i++;
        continue;
      }
      lossy = true;
      c = 0xfffd;
    }
    buf[n++] = 0xe0 | (c >> 12);
    buf[n++] = 0x80 | ((c >> 6) & 0x3f);
    buf[n++] = 0x80 | (c & 0x3f);
  }
  return lossy ? -n : n;
}

/**
 * gpt-tokenizer's `bytePairMerge`, counting instead of collecting: merge the adjacent pair whose
 * bytes have the lowest rank (the leftmost of equals) until no pair is a token. Quadratic in the
 * piece, which tokens.ts bounds by slicing.
 */
function mergeCount(t: RankTable, n: number): number {
  if (partStarts.length < n + 1) {
    partStarts = new Int32Array(n + 1);
    partRanks = new Int32Array(n + 1);
  }
  for (let i = 0; i <= n; i++) {
    partStarts[i] = i;
    partRanks[i] = i < n - 1 ? rankOfBytes(t, buf, i, i + 2) : NONE;
  }
  let parts = n + 1;
  const pairRank = (i: number) =>
    i + 2 < parts ? rankOfBytes(t, buf, partStarts[i]!, partStarts[i + 2]!) : NONE;
  while (parts > 1) {
    let lowest = NONE;
    let at = -1;
    for (let i = 0; i < parts - 1; i++) {
      if (partRanks[i]! < lowest) {
        lowest = partRanks[i]!;
        at = i;
      }
    }
    if (at === -1) break;
    partStarts.copyWithin(at + 1, at + 2, parts);
    partRanks.copyWithin(at, at + 1, parts);
    parts--;
    partRanks[at] = pairRank(at);
    if (at > 0) partRanks[at - 1] = pairRank(at - 1);
  }
  return parts - 1;
}

/**
 * Merge counts of recent pieces that are not whole tokens: repeated text (a run of one
 * character, cut into equal slices) then costs one lookup per slice instead of a merge. Keyed by
 * a fresh string of the piece's bytes, never the piece itself: a piece is a slice of the message
 * it came from and would keep that whole message alive (as gpt-tokenizer's cache did). At most
 * MERGE_CACHE_SIZE keys of at most a slice's bytes: ~2 MB at worst.
 */
const MERGE_CACHE_SIZE = 4096;
const mergeCache = new Map<string, number>();

/** Empties the merge cache (benchmarks: so that nothing measured is a hit from an earlier call). */
export function clearMergeCache(): void {
  mergeCache.clear();
}

function cachedMergeCount(t: RankTable, n: number): number {
  // apply, not spread: spreading a typed array goes through its iterator, ~2× the cost here.
  const key = String.fromCharCode.apply(null, buf.subarray(0, n) as unknown as number[]);
  const cached = mergeCache.get(key);
  if (cached !== undefined) return cached;
  const count = mergeCount(t, n);
  if (mergeCache.size >= MERGE_CACHE_SIZE) mergeCache.delete(mergeCache.keys().next().value!);
  mergeCache.set(key, count);
  return count;
}

/** Tokens of `text` in o200k_base, special-token text counted as plain text. */
export function countTokens(text: string): number {
  const t = ranks();
  let count = 0;
  for (let start = 0; start < text.length; ) {
    const end = pieceEnd(text, start);
    const n = encode(text, start, end);
    // A piece that is a whole token (looked up as the string it is) counts one.
    if (n > 0 && find(t, buf, 0, n) !== NONE) count++;
    else count += cachedMergeCount(t, Math.abs(n));
    start = end;
  }
  return count;
}

/** The rank gpt-tokenizer's byte lookup gives `bytes`, or undefined (for tests). */
export function rankOf(bytes: Uint8Array): number | undefined {
  const rank = rankOfBytes(ranks(), bytes, 0, bytes.length);
  return rank === NONE ? undefined : rank;
}

/** The bytes of token `rank` (for tests). */
export function tokenBytes(rank: number): Uint8Array {
  const t = ranks();
  return t.bytes.subarray(t.starts[rank], t.starts[rank + 1]);
}

/** How many ranks the table has (for tests). */
export function rankCount(): number {
  return ranks().starts.length - 1;
}
