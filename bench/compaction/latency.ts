import { median, medianOf, meets, orderFor, round } from '../lib/util.js';
import { type LatencyMeasurement, type LatencyMode, measureLatency } from './latency-run.js';
import { type CompactionOptions, LATENCY_TARGET } from './options.js';

/** Part 2 of the compaction benchmark: both modes, alternating order per run, and the verdict. */
interface LatencyRun {
  order: LatencyMode[];
  off: LatencyMeasurement;
  on: LatencyMeasurement;
  p50Ratio: number;
  p99Ratio: number;
  /** The same ratios over turns 2..N (turn 1 of a chat never overlaps its compaction). */
  p50RatioAfterFirst: number;
  p99RatioAfterFirst: number;
  cpuPerTurnRatio: number;
}

export async function turnLatency(opts: CompactionOptions) {
  if (opts.warmupChats > 0) {
    // Discarded: the first measurement of the process would otherwise also pay for JIT warm-up.
    for (const mode of ['off', 'on'] as const) {
      await measureLatency(
        mode,
        opts,
        `compaction latency warm-up ${mode}`,
        opts.warmupChats,
        opts.warmupMessages,
      );
    }
  }
  const runs: LatencyRun[] = [];
  for (let run = 0; run < opts.runs; run++) {
    const order = orderFor(run, 'off', 'on');
    const m = {} as Record<LatencyMode, LatencyMeasurement>;
    for (const mode of order) {
      m[mode] = await measureLatency(
        mode,
        opts,
        `compaction latency run ${run + 1} ${mode}`,
        opts.chats,
        opts.messagesPerChat,
      );
    }
    runs.push({
      order,
      off: m.off,
      on: m.on,
      p50Ratio: round(m.on.latencyMs.p50 / m.off.latencyMs.p50),
      p99Ratio: round(m.on.latencyMs.p99 / m.off.latencyMs.p99),
      p50RatioAfterFirst: round(m.on.latencyAfterFirstMs.p50 / m.off.latencyAfterFirstMs.p50),
      p99RatioAfterFirst: round(m.on.latencyAfterFirstMs.p99 / m.off.latencyAfterFirstMs.p99),
      cpuPerTurnRatio: round(m.on.processCpuUsPerTurn / m.off.processCpuUsPerTurn),
    });
  }
  const p50Ratio = medianOf(runs, (r) => r.p50Ratio);
  const p99Ratio = medianOf(runs, (r) => r.p99Ratio);
  const pick = (mode: LatencyMode, f: (x: LatencyMeasurement) => number) =>
    median(runs.map((r) => f(r[mode])));
  const side = (mode: LatencyMode) => ({
    latencyP50Ms: pick(mode, (x) => x.latencyMs.p50),
    latencyP99Ms: pick(mode, (x) => x.latencyMs.p99),
    latencyAfterFirstP50Ms: pick(mode, (x) => x.latencyAfterFirstMs.p50),
    latencyAfterFirstP99Ms: pick(mode, (x) => x.latencyAfterFirstMs.p99),
    endToEndP50Ms: pick(mode, (x) => x.endToEndMs.p50),
    endToEndP99Ms: pick(mode, (x) => x.endToEndMs.p99),
    turnsPerSec: pick(mode, (x) => x.turnsPerSec),
    processCpuUsPerTurn: pick(mode, (x) => x.processCpuUsPerTurn),
    redisCpuUsPerTurn: pick(mode, (x) => x.redisCpuUsPerTurn),
    processCpuPct: pick(mode, (x) => x.cpu.benchProcessPct),
    meanPromptMessages: pick(mode, (x) => x.meanPromptMessages),
    meanPromptTokens: pick(mode, (x) => x.meanPromptTokens),
  });
  return {
    description:
      `${opts.chats} chats, each seeded with ${opts.seedMessages} committed messages (over COMPACT_AT_TOKENS), then ` +
      `sent ${opts.messagesPerChat} messages one after another (ingest + enqueueTurn; the next one as soon as the ` +
      `previous turn's outcome is reported). createTurnWorker (concurrency ${opts.concurrency}, echo model with ` +
      `${opts.turnModelLatencyMs} ms per call, 2 calls per turn) and, in mode on, createCompactionWorker ` +
      `(concurrency ${opts.compactionConcurrency}, summariser ${opts.summariserLatencyMs} ms) in the same process, ` +
      'afterCommit enqueueing compactions as src/roles/worker.ts does. Latency = job processedOn → turn outcome. ' +
      `Modes alternate order per run; a discarded warm-up (${opts.warmupChats} chats × ${opts.warmupMessages} ` +
      'messages, both modes) precedes run 1.',
    runs,
    median: {
      off: side('off'),
      on: side('on'),
      p50Ratio,
      p99Ratio,
      p50RatioAfterFirst: medianOf(runs, (r) => r.p50RatioAfterFirst),
      p99RatioAfterFirst: medianOf(runs, (r) => r.p99RatioAfterFirst),
      cpuPerTurnRatio: medianOf(runs, (r) => r.cpuPerTurnRatio),
      onCompactionsApplied: medianOf(runs, (r) => r.on.compaction?.results.applied ?? 0),
      onTurnsOverlappingOwnCompaction: medianOf(
        runs,
        (r) => r.on.compaction?.turnsOverlappingOwnCompaction ?? 0,
      ),
      onLatencyOverlappingOwnP50Ms: medianOf(
        runs,
        (r) => r.on.compaction?.latencyOverlappingOwnMs?.p50 ?? Number.NaN,
      ),
      onLatencyOverlappingOwnP99Ms: medianOf(
        runs,
        (r) => r.on.compaction?.latencyOverlappingOwnMs?.p99 ?? Number.NaN,
      ),
    },
    target: LATENCY_TARGET,
    meetsTarget:
      meets(LATENCY_TARGET, p50Ratio) &&
      meets(LATENCY_TARGET, p99Ratio) &&
      runs.every((r) => r.on.complete && r.off.complete),
  };
}
