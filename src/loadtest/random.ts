/**
 * A seeded PRNG (mulberry32) and the few draws the schedule needs. `Math.random` is never
 * used in the load tool: the same seed must give the same schedule on every machine.
 */
export interface Random {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [min, max]. */
  int(min: number, max: number): number;
  /** Exponentially distributed with the given mean (Poisson inter-arrival times). */
  exponential(mean: number): number;
  chance(p: number): boolean;
}

export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    // 1 - u keeps the argument of log in (0, 1].
    exponential: (mean) => -Math.log(1 - next()) * mean,
    chance: (p) => p > 0 && next() < p,
  };
}
