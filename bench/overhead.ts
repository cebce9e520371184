import { measureBare, type Side } from './bare-side.js';
import { measureWorkerTurns, mockStats, startMock } from './lib/fleet.js';
import { median, meets, progress, pushTo, round, type Target } from './lib/util.js';

/**
 * Wrapper overhead: what a chatlane worker spends per turn beyond the AI SDK tool loop it
 * wraps: a turn nobody watches against the bare generateText loop, a streamed one against the
 * bare streamText loop. Both sides run as their own plain-node process against the same mock model process
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
    metric:
      'chatlane CPU per unwatched turn ÷ bare generateText loop CPU per turn, 100 and 2,000 in flight (2,000 shown)',
    comparator: '<=',
    value: 1.15,
  },
  rss: {
    metric: 'chatlane peak RSS, unwatched ÷ bare generateText loop peak RSS at 2,000 in flight',
    comparator: '<=',
    value: 1.2,
  },
  watchedCpu: {
    metric: 'chatlane CPU per watched (streamed) turn ÷ bare streamText loop CPU per turn at 2,000 in flight',
    comparator: '<=',
    value: 1.15,
  },
};

/**
 * The four sides of a level: chatlane's turns nobody watches (REPLY_STREAMING=auto: generateText)
 * against the bare generateText loop, and its streamed turns (REPLY_STREAMING=always, as a
 * watched chat's) against the bare streamText loop.
 */
const SIDES = ['unwatched', 'generate', 'watched', 'stream'] as const;
type SideName = (typeof SIDES)[number];

interface ChatlaneSide extends Side {
  /** Redis commands per turn over the batch (every client of the server: the bench's own polls too). */
  redisCommandsPerTurn: number;
}

interface LevelRun {
  order: SideName[];
  unwatched: ChatlaneSide;
  generate: Side;
  watched: ChatlaneSide;
  stream: Side;
  cpuRatio: number;
  rssRatio: number;
  watchedCpuRatio: number;
  watchedRssRatio: number;
}

/** Per run the order turns: every side goes first, and last, equally often over four runs. */
function orderOf(run: number): SideName[] {
  const k = run % SIDES.length;
  const order = [...SIDES.slice(k), ...SIDES.slice(0, k)];
  return run % 2 === 0 ? order : order.reverse();
}

export async function benchOverhead(opts: OverheadOptions) {
  const mock = await startMock(opts.latencyMs);
  const byLevel: Record<string, LevelRun[]> = {};
  try {
    for (let run = 0; run < opts.runs; run++) {
      for (const c of opts.levels) {
        const turns = c * opts.turnsPerSlot;
        const sides: Partial<Record<SideName, Side | ChatlaneSide>> = {};
        const order = orderOf(run);
        for (const side of order) {
          if (side === 'generate' || side === 'stream') {
            sides[side] = await measureBare({
              mockUrl: mock.url!,
              concurrency: c,
              turns,
              warmup: opts.warmupTurns,
              timeoutMs: opts.timeoutMs,
              statsOf: (p) => mockStats(mock, `${p}-`),
              mode: side,
              ...(opts.profileDir && { profileDir: opts.profileDir }),
            });
            continue;
          }
          const r = await measureWorkerTurns({
            workers: 1,
            concurrency: c,
            chats: turns,
            warmupChats: opts.warmupTurns,
            mock,
            label: `overhead ${c} ${side} run ${run + 1}`,
            timeoutMs: opts.timeoutMs,
            ...(opts.profileDir && { profileDir: opts.profileDir }),
            env: { ...opts.env, REPLY_STREAMING: side === 'watched' ? 'always' : 'auto' },
          });
          if (!r.complete) throw new Error(`overhead ${c}: chatlane (${side}) did not finish its turns`);
          sides[side] = {
            turns: r.turns,
            modelCalls: r.modelCalls,
            seconds: r.seconds,
            cpuS: r.workerCpuS,
            cpuMsPerTurn: r.workerCpuMsPerTurn,
            idleRssMb: r.idleRssMb[0]!,
            idleCpuPct: r.idleCpuPct[0]!,
            peakRssMb: r.peakRssMb[0]!,
            peakInFlight: r.peakInFlight,
            redisCommandsPerTurn: round(r.redisCommands / r.turns, 1),
          };
        }
        const { unwatched, generate, watched, stream } = sides as {
          unwatched: ChatlaneSide;
          generate: Side;
          watched: ChatlaneSide;
          stream: Side;
        };
        const level: LevelRun = {
          order,
          unwatched,
          generate,
          watched,
          stream,
          cpuRatio: round(unwatched.cpuMsPerTurn / generate.cpuMsPerTurn),
          rssRatio: round(unwatched.peakRssMb / generate.peakRssMb),
          watchedCpuRatio: round(watched.cpuMsPerTurn / stream.cpuMsPerTurn),
          watchedRssRatio: round(watched.peakRssMb / stream.peakRssMb),
        };
        pushTo(byLevel, c, level);
        progress(
          `overhead ${c} run ${run + 1}: CPU/turn unwatched ${unwatched.cpuMsPerTurn} ms vs generateText ` +
            `${generate.cpuMsPerTurn} ms (×${level.cpuRatio}), watched ${watched.cpuMsPerTurn} vs streamText ` +
            `${stream.cpuMsPerTurn} ms (×${level.watchedCpuRatio}); peak RSS ${unwatched.peakRssMb} vs ` +
            `${generate.peakRssMb} MB (×${level.rssRatio}), watched ${watched.peakRssMb} vs ${stream.peakRssMb} MB; ` +
            `Redis commands/turn unwatched ${unwatched.redisCommandsPerTurn}, watched ${watched.redisCommandsPerTurn}`,
        );
      }
    }
  } finally {
    await mock.kill('SIGKILL');
  }
  const medians = Object.fromEntries(
    Object.entries(byLevel).map(([c, runs]) => {
      const of = (pick: (r: LevelRun) => number) => median(runs.map(pick));
      return [
        c,
        {
          cpuRatio: of((r) => r.cpuRatio),
          rssRatio: of((r) => r.rssRatio),
          watchedCpuRatio: of((r) => r.watchedCpuRatio),
          watchedRssRatio: of((r) => r.watchedRssRatio),
          cpuMsPerTurn: Object.fromEntries(SIDES.map((s) => [s, of((r) => r[s].cpuMsPerTurn)])),
          peakRssMb: Object.fromEntries(SIDES.map((s) => [s, of((r) => r[s].peakRssMb)])),
          idleRssMb: Object.fromEntries(SIDES.map((s) => [s, of((r) => r[s].idleRssMb)])),
          peakInFlight: Object.fromEntries(SIDES.map((s) => [s, of((r) => r[s].peakInFlight)])),
          redisCommandsPerTurn: {
            unwatched: of((r) => r.unwatched.redisCommandsPerTurn),
            watched: of((r) => r.watched.redisCommandsPerTurn),
          },
          modelCallsPerTurn: Object.fromEntries(
            SIDES.map((s) => [s, of((r) => round(r[s].modelCalls / r[s].turns, 2))]),
          ),
        },
      ];
    }),
  );
  const top = medians[String(Math.max(...opts.levels))];
  return {
    description:
      'chatlane: one worker process (dist/cli.js worker, WORKER_CONCURRENCY = level) turning one-message chats ' +
      'released at once, nobody watching (REPLY_STREAMING=auto: generateText) and streamed (REPLY_STREAMING=always, ' +
      'as a watched chat); anchors: bench/bare-loop.mjs, the AI SDK generateText and streamText tool loops (same ' +
      'provider package, same chat_send tool schema, no queue, no store) with the same number of turns in flight; ' +
      `all against one mock model process answering in ${opts.latencyMs} ms (2 calls per turn), ${opts.turnsPerSlot}× ` +
      `level turns per measurement after ${opts.warmupTurns} warm-up turns; CPU from /proc/<pid>/stat of the ` +
      'measured process only, peak RSS sampled from /proc every 100 ms; the four sides rotate order per run; ' +
      'Redis commands from INFO stats over the batch (exact on a Redis of the benchmark’s own)',
    settings: opts,
    runs: byLevel,
    median: medians,
    targets: OVERHEAD_TARGETS,
    meetsTarget: top
      ? {
          cpu: meets(OVERHEAD_TARGETS.cpu!, top.cpuRatio),
          rss: meets(OVERHEAD_TARGETS.rss!, top.rssRatio),
          watchedCpu: meets(OVERHEAD_TARGETS.watchedCpu!, top.watchedCpuRatio),
        }
      : null,
  };
}
