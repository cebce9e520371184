import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';

/**
 * o200k_base's pre-tokenizer: where each piece that byte-pair merge sees ends. The regex is
 * gpt-tokenizer's own, and it is most of the cost of a count (~110 ns a character, the
 * Unicode property classes in V8's engine). So pieces made of ASCII are found by hand below,
 * deciding exactly as the regex's alternatives do in order:
 *
 *   A1 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+('s|'t|…)?
 *   A2 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*('s|'t|…)?
 *   A3 \p{N}{1,3}     A4  ?[^\s\p{L}\p{N}]+[\r\n/]*     A5 \s*[\r\n]+     A6 \s+(?!\S)     A7 \s+
 *
 * and wherever a decision depends on a character beyond ASCII, the regex itself (sticky, at the
 * same position) gives the piece. Every character starts a match of one alternative, so
 * matches are contiguous and the two can take turns. test/unit/pretokenize.test.ts compares
 * the pieces with the regex's on mixed random text.
 */

const SPLIT_AT = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'yu');

const LOWER = 1;
const UPPER = 2;
const DIGIT = 3;
/** \r and \n. */
const NEWLINE = 4;
/** The rest of JavaScript's \s in ASCII: space, \t, \v, \f. */
const SPACE = 5;
/** Not a letter, digit or space: punctuation and control characters. */
const OTHER = 6;
/** Beyond ASCII: the regex decides. */
const UNKNOWN = 7;
const END = 0;

const ASCII = new Uint8Array(128).fill(OTHER);
for (let c = 0x61; c <= 0x7a; c++) ASCII[c] = LOWER;
for (let c = 0x41; c <= 0x5a; c++) ASCII[c] = UPPER;
for (let c = 0x30; c <= 0x39; c++) ASCII[c] = DIGIT;
ASCII[0x0a] = NEWLINE;
ASCII[0x0d] = NEWLINE;
for (const c of [0x20, 0x09, 0x0b, 0x0c]) ASCII[c] = SPACE;

function kind(text: string, i: number): number {
  if (i >= text.length) return END;
  const c = text.charCodeAt(i);
  return c < 128 ? ASCII[c]! : UNKNOWN;
}

const isLetter = (k: number) => k === LOWER || k === UPPER;
const isSpace = (k: number) => k === SPACE || k === NEWLINE;

/** End of the regex's match at `start` (start < text.length). */
function regexEnd(text: string, start: number): number {
  SPLIT_AT.lastIndex = start;
  const match = SPLIT_AT.exec(text);
  // Unreachable: every character starts a match (see above).
  if (match === null) throw new Error('o200k pre-tokenizer: no piece at a character');
  return start + match[0].length;
}

/** A1/A2 from the first letter at `i`: -1 when a character beyond ASCII decides. */
function lettersEnd(text: string, i: number): number {
  let end = i;
  while (kind(text, end) === UPPER) end++;
  let k = kind(text, end);
  // A1 takes the lowercase run after the capitals; without one, A2 is the capitals alone.
  while (k === LOWER) k = kind(text, ++end);
  if (k === UNKNOWN) return -1;
  return contractionEnd(text, end);
}

/** ('s|'t|'d|'m|'ll|'ve|'re), any case, if one follows. */
function contractionEnd(text: string, end: number): number {
  if (text.charCodeAt(end) !== 0x27) return end;
  const a = text.charCodeAt(end + 1) | 0x20;
  if (a === 0x73 || a === 0x74 || a === 0x64 || a === 0x6d) return end + 2; // s t d m
  const b = text.charCodeAt(end + 2) | 0x20;
  if ((a === 0x6c && b === 0x6c) || (a === 0x76 && b === 0x65) || (a === 0x72 && b === 0x65)) return end + 3;
  return end;
}

/** End of the piece that starts at `start` (start < text.length). */
export function pieceEnd(text: string, start: number): number {
  const k = kind(text, start);
  if (k === UNKNOWN) return regexEnd(text, start);
  if (isLetter(k)) {
    const end = lettersEnd(text, start);
    return end < 0 ? regexEnd(text, start) : end;
  }
  if (k === DIGIT) {
    let end = start + 1;
    while (end < start + 3 && kind(text, end) === DIGIT) end++;
    return end < start + 3 && kind(text, end) === UNKNOWN ? regexEnd(text, start) : end;
  }
  const next = kind(text, start + 1);
  if (next === UNKNOWN) return regexEnd(text, start);
  // A1/A2 with the one-character prefix (anything but \r, \n, a letter or a digit).
  if (k !== NEWLINE && isLetter(next)) {
    const end = lettersEnd(text, start + 1);
    return end < 0 ? regexEnd(text, start) : end;
  }
  // A4: an optional space, then punctuation, then any \r\n.
  const punct = k === OTHER ? start : text.charCodeAt(start) === 0x20 && next === OTHER ? start + 1 : -1;
  if (punct >= 0) {
    let end = punct;
    let e = kind(text, end);
    while (e === OTHER) e = kind(text, ++end);
    if (e === UNKNOWN) return regexEnd(text, start);
    // [\r\n/]*: a slash after the newlines belongs to this piece too.
    while (e === NEWLINE || text.charCodeAt(end) === 0x2f) e = kind(text, ++end);
    return end;
  }
  // Whitespace: A5 up to its last \r or \n; else A6 all but its last character before a
  // non-space; else A7 the whole run.
  let end = start;
  let lastNewline = -1;
  let e = k;
  while (isSpace(e)) {
    if (e === NEWLINE) lastNewline = end;
    e = kind(text, ++end);
  }
  if (e === UNKNOWN) return regexEnd(text, start);
  if (lastNewline >= 0) return lastNewline + 1;
  if (e !== END && end - start >= 2) return end - 1;
  return end;
}
