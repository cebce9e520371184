import { measureWorkerTurns, startMock, type WorkerLoadResult } from './lib/fleet.js';
import { median, meets, progress, pushTo, round, type Target } from './lib/util.js';

/**
 * High concurrency: one worker process at WORKER_CONCURRENCY 100 / 1,000 / 2,000 against a
 * mock model answering every call in 2 s (a turn = 2 calls = 4 s), 2× as many one-message
 * chats as the concurrency, released at once. Ideal: every slot busy all the time, so
 * turns/s = concurrency ÷ 4 s. Memory: peak RSS over the batch, and what each in-flight turn
 * adds to the idle worker.
 */

export interface ConcurrencyOptions {
  runs: number;
  levels: number[];
  latencyMs: number;
  chatsPerSlot: number;
  warmupChats: number;
  timeoutMs: number;
}

export const CONCURRENCY_DEFAULTS: ConcurrencyOptions = {
  runs: 3,
  levels: [100, 1000, 2000],
  latencyMs: 2000,
  chatsPerSlot: 2,
  warmupChats: 200,
  timeoutMs: 300_000,
};

export const CONCURRENCY_TARGETS: Record<string, Target> = {
  efficiency: { metric: 'turns/s ÷ ideal at concurrency 1,000', comparator: '>=', value: 0.9 },
  rssPerTurn: {
    metric: 'KB of RSS per in-flight turn (peak − idle) ÷ concurrency',
    comparator: '<=',
    value: 150,
  },
};

interface LevelRun extends WorkerLoadResult {
  idealTurnsPerSec: number;
  efficiency: number;
  rssPerInFlightTurnKb: number;
}

export async function benchConcurrency(opts: ConcurrencyOptions) {
  const mock = await startMock(opts.latencyMs);
  const turnMs = 2 * opts.latencyMs;
  const byLevel: Record<string, LevelRun[]> = {};
  try {
    for (let run = 0; run < opts.runs; run++) {
      for (const c of opts.levels) {
        const r = await measureWorkerTurns({
          workers: 1,
          concurrency: c,
          chats: c * opts.chatsPerSlot,
          warmupChats: Math.min(opts.warmupChats, c),
          mock,
          label: `concurrency ${c} run ${run + 1}`,
          timeoutMs: opts.timeoutMs,
        });
        const ideal = c / (turnMs / 1000);
        const level: LevelRun = {
          ...r,
          idealTurnsPerSec: round(ideal, 1),
          efficiency: round(r.turnsPerSec / ideal),
          rssPerInFlightTurnKb: round(((r.peakRssMb[0]! - r.idleRssMb[0]!) * 1024) / c, 1),
        };
        pushTo(byLevel, c, level);
        progress(
          `concurrency ${c} run ${run + 1}: ${r.turnsPerSec} turns/s (ideal ${level.idealTurnsPerSec}), ` +
            `efficiency ${level.efficiency}, RSS ${r.idleRssMb[0]} → ${r.peakRssMb[0]} MB`,
        );
      }
    }
  } finally {
    await mock.kill('SIGKILL');
  }
  const medians = Object.fromEntries(
    Object.entries(byLevel).map(([c, runs]) => [
      c,
      {
        turnsPerSec: median(runs.map((r) => r.turnsPerSec)),
        idealTurnsPerSec: runs[0]!.idealTurnsPerSec,
        efficiency: median(runs.map((r) => r.efficiency)),
        idleRssMb: median(runs.map((r) => r.idleRssMb[0]!)),
        peakRssMb: median(runs.map((r) => r.peakRssMb[0]!)),
        rssPerInFlightTurnKb: median(runs.map((r) => r.rssPerInFlightTurnKb)),
        workerCpuMsPerTurn: median(runs.map((r) => r.workerCpuMsPerTurn)),
        modelCallsPerTurn: median(runs.map((r) => round(r.modelCalls / r.turns, 2))),
        complete: runs.every((r) => r.complete),
      },
    ]),
  );
  const at1000 = medians['1000'];
  const worstRssPerTurn = Math.max(...Object.values(medians).map((m) => m.rssPerInFlightTurnKb));
  return {
    description:
      `one worker process (dist/cli.js worker), WORKER_CONCURRENCY ${opts.levels.join(' / ')}; mock model ` +
      `(separate process) answering every call in ${opts.latencyMs} ms, 2 calls per turn; ` +
      `${opts.chatsPerSlot}× as many one-message chats as the concurrency, written while the turns queue is ` +
      'paused and released at once; time from the resume to the last turn.committed; RSS from /proc sampled ' +
      'every 100 ms (idle = just before the resume)',
    settings: opts,
    runs: byLevel,
    median: medians,
    targets: CONCURRENCY_TARGETS,
    meetsTarget: {
      efficiency: at1000 ? meets(CONCURRENCY_TARGETS.efficiency!, at1000.efficiency) : null,
      rssPerTurn: meets(CONCURRENCY_TARGETS.rssPerTurn!, worstRssPerTurn),
    },
  };
}
