/** Latency summaries: nearest-rank percentiles over every sample (no sampling, no buckets). */

export interface Summary {
  count: number;
  mean: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

const round = (v: number, digits = 1) => {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
};

/** Nearest rank: with 200 samples p99 is the 198th smallest, an observed value. */
export function percentileOfSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function summarize(values: number[], digits = 1): Summary {
  if (values.length === 0) {
    return {
      count: 0,
      mean: Number.NaN,
      min: Number.NaN,
      p50: Number.NaN,
      p90: Number.NaN,
      p99: Number.NaN,
      max: Number.NaN,
    };
  }
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: sorted.length,
    mean: round(sum / sorted.length, digits),
    min: round(sorted[0]!, digits),
    p50: round(percentileOfSorted(sorted, 50), digits),
    p90: round(percentileOfSorted(sorted, 90), digits),
    p99: round(percentileOfSorted(sorted, 99), digits),
    max: round(sorted[sorted.length - 1]!, digits),
  };
}

/** Jain's fairness index: 1 when every value is equal, 1/n when one value takes everything. */
export function jainIndex(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  let sum = 0;
  let squares = 0;
  for (const v of values) {
    sum += v;
    squares += v * v;
  }
  return squares === 0 ? 1 : round((sum * sum) / (values.length * squares), 3);
}
