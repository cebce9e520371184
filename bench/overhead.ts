import { measureBare, type Side } from './bare-side.js';
import { measureWorkerTurns, mockStats, startMock } from './lib/fleet.js';
import { median, meets, orderFor, progress, pushTo, round, type Target } from './lib/util.js';

/**
 * Wrapper overhead: what a chatlane worker spends per turn beyond the AI SDK tool loop it
 * wraps. Both sides run as their own plain-node process against the same mock model process
 * (same provider package, same `chat_send` tool, 2 model calls per turn) with the same number
 * of turns in flight; CPU per turn from /proc of the measured process only, peak RSS sampled
 * from /proc. chatlane's side includes everything it does per turn: queue, lease, store reads
 * and fenced writes, context pipeline, events.
 */

export interface OverheadOptions {
  runs: number;
  levels: number[];
  latencyMs: number;
  /** Turns per measurement = level × turnsPerSlot. */
  turnsPerSlot: number;
  warmupTurns: number;
  timeoutMs: number;
  /** Extra environment of the chatlane worker (`--tracing`: an OTLP endpoint). */
  env?: Record<string, string>;
  /** CPU and heap profiles of the chatlane worker go here (one pair per measurement). */
  profileDir?: string;
}

export const OVERHEAD_DEFAULTS: OverheadOptions = {
  runs: 3,
  levels: [100, 2000],
  latencyMs: 1000,
  turnsPerSlot: 2,
  warmupTurns: 200,
  timeoutMs: 300_000,
};

export const OVERHEAD_TARGETS: Record<string, Target> = {
  cpu: {
    metric: 'chatlane CPU per turn ÷ bare tool loop CPU per turn at 2,000 in flight',
    comparator: '<=',
    value: 1.15,
  },
  rss: {
    metric: 'chatlane peak RSS ÷ bare tool loop peak RSS at 2,000 in flight',
    comparator: '<=',
    value: 1.2,
  },
};

interface LevelRun {
  order: string[];
  chatlane: Side;
  bare: Side;
  cpuRatio: number;
  rssRatio: number;
}

export async function benchOverhead(opts: OverheadOptions) {
  const mock = await startMock(opts.latencyMs);
  const byLevel: Record<string, LevelRun[]> = {};
  try {
    for (let run = 0; run < opts.runs; run++) {
      for (const c of opts.levels) {
        const turns = c * opts.turnsPerSlot;
        const sides: Partial<Record<'chatlane' | 'bare', Side>> = {};
        const order = orderFor(run, 'chatlane', 'bare');
        for (const side of order) {
          if (side === 'bare') {
            sides.bare = await measureBare({
              mockUrl: mock.url!,
              concurrency: c,
              turns,
              warmup: opts.warmupTurns,
              timeoutMs: opts.timeoutMs,
              statsOf: (p) => mockStats(mock, `${p}-`),
              ...(opts.profileDir && { profileDir: opts.profileDir }),
            });
          } else {
            const r = await measureWorkerTurns({
              workers: 1,
              concurrency: c,
              chats: turns,
              warmupChats: opts.warmupTurns,
              mock,
              label: `overhead ${c} run ${run + 1}`,
              timeoutMs: opts.timeoutMs,
              ...(opts.profileDir && { profileDir: opts.profileDir }),
              ...(opts.env && { env: opts.env }),
            });
            if (!r.complete) throw new Error(`overhead ${c}: chatlane did not finish its turns`);
            sides.chatlane = {
              turns: r.turns,
              modelCalls: r.modelCalls,
              seconds: r.seconds,
              cpuS: r.workerCpuS,
              cpuMsPerTurn: r.workerCpuMsPerTurn,
              idleRssMb: r.idleRssMb[0]!,
              idleCpuPct: r.idleCpuPct[0]!,
              peakRssMb: r.peakRssMb[0]!,
              peakInFlight: r.peakInFlight,
            };
          }
        }
        const { chatlane, bare } = sides as Record<'chatlane' | 'bare', Side>;
        const level: LevelRun = {
          order,
          chatlane,
          bare,
          cpuRatio: round(chatlane.cpuMsPerTurn / bare.cpuMsPerTurn),
          rssRatio: round(chatlane.peakRssMb / bare.peakRssMb),
        };
        pushTo(byLevel, c, level);
        progress(
          `overhead ${c} run ${run + 1}: CPU/turn chatlane ${chatlane.cpuMsPerTurn} ms vs bare ${bare.cpuMsPerTurn} ms ` +
            `(×${level.cpuRatio}), peak RSS ${chatlane.peakRssMb} vs ${bare.peakRssMb} MB (×${level.rssRatio}), ` +
            `peak in flight ${chatlane.peakInFlight} vs ${bare.peakInFlight}`,
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
        chatlaneCpuMsPerTurn: median(runs.map((r) => r.chatlane.cpuMsPerTurn)),
        bareCpuMsPerTurn: median(runs.map((r) => r.bare.cpuMsPerTurn)),
        cpuRatio: median(runs.map((r) => r.cpuRatio)),
        chatlanePeakRssMb: median(runs.map((r) => r.chatlane.peakRssMb)),
        barePeakRssMb: median(runs.map((r) => r.bare.peakRssMb)),
        chatlaneIdleRssMb: median(runs.map((r) => r.chatlane.idleRssMb)),
        bareIdleRssMb: median(runs.map((r) => r.bare.idleRssMb)),
        chatlaneIdleCpuPct: median(runs.map((r) => r.chatlane.idleCpuPct)),
        bareIdleCpuPct: median(runs.map((r) => r.bare.idleCpuPct)),
        rssRatio: median(runs.map((r) => r.rssRatio)),
        peakInFlight: {
          chatlane: median(runs.map((r) => r.chatlane.peakInFlight)),
          bare: median(runs.map((r) => r.bare.peakInFlight)),
        },
        modelCallsPerTurn: {
          chatlane: median(runs.map((r) => round(r.chatlane.modelCalls / r.chatlane.turns, 2))),
          bare: median(runs.map((r) => round(r.bare.modelCalls / r.bare.turns, 2))),
        },
      },
    ]),
  );
  const top = medians[String(Math.max(...opts.levels))];
  return {
    description:
      'chatlane: one worker process (dist/cli.js worker, WORKER_CONCURRENCY = level) turning one-message chats ' +
      'released at once; bare: bench/bare-loop.mjs, the AI SDK streamText tool loop (same provider package, ' +
      `same chat_send tool schema, no queue, no store) with the same number of turns in flight; both against one ` +
      `mock model process answering in ${opts.latencyMs} ms (2 calls per turn), ${opts.turnsPerSlot}× level ` +
      `turns per measurement after ${opts.warmupTurns} warm-up turns; CPU from /proc/<pid>/stat of the measured ` +
      'process only, peak RSS sampled from /proc every 100 ms; the two sides alternate order per run',
    settings: opts,
    runs: byLevel,
    median: medians,
    targets: OVERHEAD_TARGETS,
    meetsTarget: top
      ? { cpu: meets(OVERHEAD_TARGETS.cpu!, top.cpuRatio), rss: meets(OVERHEAD_TARGETS.rss!, top.rssRatio) }
      : null,
  };
}
