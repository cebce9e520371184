import { turnLatency } from './latency.js';
import type { CompactionOptions } from './options.js';
import { tokensPerTurn } from './tokens.js';

export { COMPACTION_DEFAULTS, type CompactionOptions } from './options.js';

/** The compaction benchmark (`--only compaction`): tokens per turn (tokens.ts), then turn latency (latency.ts). */
export async function benchCompaction(opts: CompactionOptions) {
  const tokens = await tokensPerTurn(opts);
  const latency = await turnLatency(opts);
  return {
    settings: opts,
    tokensPerTurn: tokens,
    latency,
    meetsTarget: tokens.meetsTarget && latency.meetsTarget,
  };
}
