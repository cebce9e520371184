// The statistics of the plain-node machine probes (page-touch, wake-cost, queue-cost), which
// run without a TypeScript loader and so cannot import bench/lib/util.ts.

/** The middle value (the upper one of an even count). */
export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** To one decimal. */
export const round1 = (x) => Math.round(x * 10) / 10;
