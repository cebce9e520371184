import { describe, expect, it } from 'vitest';
import { tuple } from '../../src/shared/store/records.js';

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
});
