/** The largest value of either half of a Redis stream id (`ms-seq`): both are unsigned 64-bit. */
const U64_MAX = 2n ** 64n - 1n;

/** A Redis stream id `<ms>-<seq>`: two unsigned 64-bit integers (Redis refuses anything larger). */
export function isStreamId(value: string): boolean {
  const m = /^(\d{1,20})-(\d{1,20})$/.exec(value);
  return m !== null && BigInt(m[1]!) <= U64_MAX && BigInt(m[2]!) <= U64_MAX;
}

/** Redis stream ids `ms-seq` in order: by milliseconds, then sequence (string order breaks at 10 ms digits). */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = split(a);
  const [bm, bs] = split(b);
  if (am !== bm) return am < bm ? -1 : 1;
  return as === bs ? 0 : as < bs ? -1 : 1;
}

/**
 * The XRANGE start for the entries strictly after `id` (`(id`), or undefined when no entry can
 * follow it: Redis answers `(` on the largest id (`18446744073709551615-18446744073709551615`)
 * with an error ("invalid start ID for the interval") instead of an empty range, so a client's
 * cursor at the end is a read of nothing, never a Redis error.
 */
export function rangeStartAfter(id: string): string | undefined {
  const [ms, seq] = split(id);
  return ms === U64_MAX && seq === U64_MAX ? undefined : `(${id}`;
}

function split(id: string): [bigint, bigint] {
  const dash = id.indexOf('-');
  return [BigInt(id.slice(0, dash)), BigInt(id.slice(dash + 1))];
}
