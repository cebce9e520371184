/** Redis stream ids `ms-seq` in order: by milliseconds, then sequence (string order breaks at 10 ms digits). */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = split(a);
  const [bm, bs] = split(b);
  if (am !== bm) return am < bm ? -1 : 1;
  return as === bs ? 0 : as < bs ? -1 : 1;
}

function split(id: string): [bigint, bigint] {
  const dash = id.indexOf('-');
  return [BigInt(id.slice(0, dash)), BigInt(id.slice(dash + 1))];
}
