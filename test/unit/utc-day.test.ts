import { describe, expect, it } from 'vitest';
import { utcDay } from '../../src/shared/usage.js';

const at = (iso: string) => Date.parse(iso);

describe('utcDay', () => {
  it('names the UTC day of each time, across midnight and back again', () => {
    // The day last asked for is remembered: asking in turn for both sides of midnight (and for
    // far-off days) must still give each time its own day.
    const times = [
      '2026-11-26T23:59:59.999Z',
      '2026-11-27T00:00:00.000Z',
      '2026-11-26T00:00:00.000Z',
      '2026-11-26T23:59:59.999Z',
      '1969-12-31T23:59:59.999Z',
      '1970-01-01T00:00:00.000Z',
      '2027-01-01T12:00:00.000Z',
      '2026-11-27T00:00:00.001Z',
    ];
    for (const iso of times) expect(utcDay(at(iso)), iso).toBe(iso.slice(0, 10));
  });

  it('throws on a time that is not one, as Date does', () => {
    expect(() => utcDay(Number.NaN)).toThrow(RangeError);
    expect(utcDay(at('2026-11-26T10:00:00Z'))).toBe('2026-11-26');
  });
});
