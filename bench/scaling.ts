import { cpus } from 'node:os';
import { measureWorkerTurns, startMock, type WorkerLoadResult } from './lib/fleet.js';
import { median, progress, pushTo, round } from './lib/util.js';

/**
 * Horizontal scaling: 1, 2, 4 worker processes (WORKER_CONCURRENCY 32 each) on a mock model
 * answering in 200 ms, the same batch of one-message chats released at once. Scaling
 * efficiency of n workers = turns/s ÷ (n × turns/s of one). Where it falls under 0.9, the
 * CPU columns say whether the machine (all cores busy) or chatlane was the limit.
 */

export interface ScalingOptions {
  runs: number;
  workers: number[];
  concurrency: number;
  latencyMs: number;
  chats: number;
  warmupChats: number;
  timeoutMs: number;
}

export const SCALING_DEFAULTS: ScalingOptions = {
  runs: 3,
  workers: [1, 2, 4],
  concurrency: 32,
  latencyMs: 200,
  chats: 2560,
  warmupChats: 128,
  timeoutMs: 300_000,
};

interface ScalingRun extends WorkerLoadResult {
  /** CPU of workers + mock + Redis over the batch, as % of all cores (`hostBusyPct` adds neighbours). */
  machineCpuPct: number;
  idealTurnsPerSec: number;
}

export async function benchScaling(opts: ScalingOptions) {
  const mock = await startMock(opts.latencyMs);
  const cores = cpus().length;
  const byWorkers: Record<string, ScalingRun[]> = {};
  try {
    for (let run = 0; run < opts.runs; run++) {
      for (const n of opts.workers) {
        const r = await measureWorkerTurns({
          workers: n,
          concurrency: opts.concurrency,
          chats: opts.chats,
          warmupChats: opts.warmupChats,
          mock,
          label: `scaling ${n} worker(s) run ${run + 1}`,
          timeoutMs: opts.timeoutMs,
        });
        const cpu = r.workerCpuS + (r.mockCpuS ?? 0) + r.redisCpuS;
        const s: ScalingRun = {
          ...r,
          machineCpuPct: round((cpu / r.seconds / cores) * 100, 1),
          idealTurnsPerSec: round((n * opts.concurrency) / ((2 * opts.latencyMs) / 1000), 1),
        };
        pushTo(byWorkers, n, s);
        progress(
          `scaling ${n} worker(s) run ${run + 1}: ${r.turnsPerSec} turns/s, our processes ${s.machineCpuPct} % of the machine, machine busy ${r.hostBusyPct} %`,
        );
      }
    }
  } finally {
    await mock.kill('SIGKILL');
  }
  const one = median((byWorkers[opts.workers[0]!] ?? []).map((r) => r.turnsPerSec)) / opts.workers[0]!;
  const medians = Object.fromEntries(
    Object.entries(byWorkers).map(([n, runs]) => {
      const tps = median(runs.map((r) => r.turnsPerSec));
      return [
        n,
        {
          turnsPerSec: tps,
          idealTurnsPerSec: runs[0]!.idealTurnsPerSec,
          scalingEfficiency: round(tps / (Number(n) * one)),
          machineCpuPct: median(runs.map((r) => r.machineCpuPct)),
          hostBusyPct: median(runs.map((r) => r.hostBusyPct)),
          workerCpuMsPerTurn: median(runs.map((r) => r.workerCpuMsPerTurn)),
          complete: runs.every((r) => r.complete),
        },
      ];
    }),
  );
  const saturatedAt = opts.workers.find((n) => (medians[n]?.scalingEfficiency ?? 1) < 0.9);
  return {
    description:
      `${opts.workers.join(' / ')} worker processes (dist/cli.js worker, WORKER_CONCURRENCY ${opts.concurrency} each) ` +
      `on one machine (${cores} cores) with Redis and the mock model (separate process, ${opts.latencyMs} ms per ` +
      `call, 2 calls per turn); ${opts.chats} one-message chats released at once; scaling efficiency = ` +
      'turns/s ÷ (workers × turns/s of one worker)',
    settings: opts,
    runs: byWorkers,
    median: medians,
    target: { metric: 'scaling efficiency until the machine saturates', comparator: '>=', value: 0.9 },
    firstBelowTarget: saturatedAt ?? null,
  };
}
