import { describe, expect, it } from 'vitest';
import {
  STORED_MAX_DEPTH,
  storable,
  storedJson,
  TOO_DEEP_MARKER,
  UnstorableError,
} from '../../src/shared/storable.js';

const LONE = '\ud800';

function nested(depth: number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = { v };
  return v;
}

describe('storable', () => {
  it('returns an already storable value as the same object, without copying it', () => {
    const message = {
      id: 'm1',
      role: 'assistant',
      parts: [
        { type: 'text', text: 'hi' },
        { type: 'tool-chat_send', input: { text: 'x' }, output: [1, NaN] },
      ],
      metadata: { ts: 1, tokens: 5, missing: undefined },
    };
    expect(storable(message)).toBe(message);
    expect(storedJson(message)).toBe(JSON.stringify(message));
  });

  it('copies only the branches it repairs and leaves the input untouched', () => {
    const kept = { type: 'text', text: 'fine' };
    const input = { parts: [kept, { type: 'text', text: `bad ${LONE}` }], [`k${LONE}`]: 1, after: 'x' };
    const out = storable(input) as { parts: unknown[]; after: string };
    expect(out).not.toBe(input);
    expect(out.parts[0]).toBe(kept);
    expect(out.parts[1]).toEqual({ type: 'text', text: 'bad \ufffd' });
    expect(Object.keys(out)).toEqual(['parts', 'k\ufffd', 'after']);
    expect(input.parts[1]).toEqual({ type: 'text', text: `bad ${LONE}` });
  });

  it('writes what JSON.stringify writes for toJSON values, holes and values JSON drops', () => {
    // biome-ignore lint/suspicious/noSparseArray: the hole is what is tested
    const value = { at: new Date(0), list: [1, , undefined, () => 1], f: () => 1 };
    expect(storedJson(value)).toBe(JSON.stringify(value));
  });

  it('clips or refuses a value nested deeper than the limit', () => {
    const deep = nested(STORED_MAX_DEPTH + 1);
    expect(storedJson(deep, { tooDeep: 'clip' })).toContain(JSON.stringify(TOO_DEEP_MARKER));
    expect(() => storable(deep)).toThrow(UnstorableError);
    expect(storable(nested(STORED_MAX_DEPTH - 1))).toEqual(nested(STORED_MAX_DEPTH - 1));
  });
});
