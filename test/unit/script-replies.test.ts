import { describe, expect, it } from 'vitest';
import { acquireOk, tuple } from '../../src/shared/store/records.js';

describe('script replies', () => {
  it('a status string then strings and numbers is accepted as it came, without a copy', () => {
    const reply = ['ok', 12, '1-0', 0];
    expect(tuple.parse(reply)).toBe(reply);
    expect(tuple.parse(['missing'])).toEqual(['missing']);
  });

  it('anything else is refused: no status, a status that is not a string, nested or null items', () => {
    for (const bad of [[], [1, 'ok'], ['ok', null], ['ok', ['1-0']], 'ok', null, { 0: 'ok' }]) {
      expect(tuple.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
    }
  });

  it('an acquire reply is accepted as it came; a field of the wrong type or a reply of another length is refused', () => {
    const reply = [
      'ok',
      7,
      ['{"id":"s1"}'],
      null,
      null,
      ['{"id":"m1"}'],
      1,
      [['1-0', ['m', '{}']]],
      'notes',
      0,
      2,
      'run-0',
      1,
    ];
    expect(acquireOk.parse(reply)).toBe(reply);
    const bad = (at: number, value: unknown) => reply.map((v, i) => (i === at ? value : v));
    for (const wrong of [
      bad(0, 'busy'),
      bad(1, '7'),
      bad(2, [1]),
      bad(3, 5),
      bad(5, null),
      bad(7, [['1-0']]),
      bad(7, [['1-0', [1]]]),
      bad(9, null),
      bad(11, 3),
      bad(12, '1'),
      reply.slice(0, 12),
      [...reply, 0],
    ]) {
      expect(acquireOk.safeParse(wrong).success, JSON.stringify(wrong)).toBe(false);
    }
  });
});
