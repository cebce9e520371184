import { describe, expect, it } from 'vitest';
import { HttpError } from '../../src/ingress/errors.js';
import { parsePageQuery } from '../../src/ingress/routes/outbox.js';
import { formatCursor, parseCursor } from '../../src/ingress/stream/cursor.js';
import { compareStreamIds, isStreamId, rangeStartAfter } from '../../src/shared/stream-id.js';
import {
  Fuzz,
  fuzzSeed,
  integerText,
  MAX_STREAM_CURSOR,
  MAX_STREAM_ID,
  streamCursorText,
  streamIdText,
} from '../helpers/fuzz.js';

/**
 * The cursor parsers against thousands of generated values: whatever a client sends, a parser
 * either refuses it (the route's 400) or accepts a value every later step handles — never an
 * exception, never an id Redis would refuse to range after.
 */

const seed = fuzzSeed();
const f = new Fuzz(seed);
const N = 4000;

/** An independent reading of "unsigned 64-bit": digits only, compared as zero-padded text. */
function isU64Text(text: string): boolean {
  if (!/^[0-9]{1,20}$/.test(text)) return false;
  return text.padStart(20, '0') <= '18446744073709551615';
}

function oracleStreamId(text: string): boolean {
  const parts = text.split('-');
  return parts.length === 2 && isU64Text(parts[0]!) && isU64Text(parts[1]!);
}

describe(`cursor parsers under generated input (FUZZ_SEED=${seed})`, () => {
  it('isStreamId accepts exactly two unsigned 64-bit integers joined by a dash', () => {
    for (let i = 0; i < N; i++) {
      const text = streamIdText(f);
      expect(isStreamId(text), `seed ${seed}: ${JSON.stringify(text)}`).toBe(oracleStreamId(text));
    }
  });

  it('every accepted stream id can be ranged after and compared, the largest one reads nothing', () => {
    let accepted = 0;
    for (let i = 0; i < N; i++) {
      const text = f.chance(0.05) ? MAX_STREAM_ID : `${integerText(f)}-${integerText(f)}`;
      if (!isStreamId(text)) continue;
      accepted++;
      const start = rangeStartAfter(text);
      expect(start, `seed ${seed}: ${text}`).toBe(text === MAX_STREAM_ID ? undefined : `(${text}`);
      expect(compareStreamIds(text, '0-0'), `seed ${seed}: ${text}`).toBeGreaterThanOrEqual(0);
      expect(compareStreamIds(MAX_STREAM_ID, text), `seed ${seed}: ${text}`).toBeGreaterThanOrEqual(0);
    }
    expect(accepted).toBeGreaterThan(N / 10);
  });

  it('parseCursor never throws; what it accepts is two stream ids and formats back to the trimmed input', () => {
    let accepted = 0;
    for (let i = 0; i < N; i++) {
      const text = f.chance(0.02) ? MAX_STREAM_CURSOR : streamCursorText(f);
      const cursor = parseCursor(text);
      const parts = text.trim().split('.');
      const expected = parts.length === 2 && oracleStreamId(parts[0]!) && oracleStreamId(parts[1]!);
      expect(cursor !== undefined, `seed ${seed}: ${JSON.stringify(text)}`).toBe(expected);
      if (!cursor) continue;
      accepted++;
      expect(formatCursor(cursor)).toBe(text.trim());
      for (const id of [cursor.outbox, cursor.events]) expect(() => rangeStartAfter(id)).not.toThrow();
    }
    // The generator's sanity: enough of its values are real cursors to test the accepting side.
    expect(accepted).toBeGreaterThan(N / 40);
  });

  it('a page query is parsed or refused with 400 INVALID_CURSOR / VALIDATION_FAILED, nothing else', () => {
    for (let i = 0; i < N; i++) {
      const query: Record<string, unknown> = {};
      if (f.chance(0.9)) query.after = f.chance(0.1) ? [streamIdText(f), streamIdText(f)] : streamIdText(f);
      if (f.chance(0.3)) query.limit = integerText(f);
      if (f.chance(0.05)) query[f.pick(['cursor', 'before', '__proto__', 'constructor'])] = '1';
      try {
        const page = parsePageQuery(query);
        expect(page.after === undefined || isStreamId(page.after), `seed ${seed}`).toBe(true);
      } catch (err) {
        expect(err, `seed ${seed}: ${JSON.stringify(query)}`).toBeInstanceOf(HttpError);
        expect(['INVALID_CURSOR', 'VALIDATION_FAILED']).toContain((err as HttpError).code);
      }
    }
  });
});
