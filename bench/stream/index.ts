import { BareProcess, combineSides, type Side } from '../bare-side.js';
import { mockStats } from '../lib/fleet.js';
import {
  deletePrefix,
  median,
  meets,
  messageText,
  orderFor,
  progress,
  pushTo,
  round,
  sleep,
  type Target,
} from '../lib/util.js';
import { type LatencyLevel, measureLatency, pooledLatency, warmUp } from './latency.js';
import { type IngressMemory, measureIngressMemory } from './memory.js';
import { measureRedisCost, type PhaseCost, type RedisCost } from './redis.js';
import { ownRedis, type Stack, startStack } from './stack.js';

/**
 * Streamed replies (issue 21 §6), three measurements per run on a redis-server of the
 * benchmark's own, with real `dist/cli.js` processes and the mock model streaming its chunks
 * `chunkMs` apart:
 * 1. latency: model's first token → the client's first `text-delta`, at each level of
 *    concurrent `/v1/ui` conversations spread over the ingresses, kept in flight (a closed
 *    loop) until the level's replies are in (stream-latency.ts);
 * 2. Redis commands and bytes per streamed reply, worker and ingress apart (stream-redis.ts);
 * 3. ingress memory per open stream (stream-memory.ts).
 * At each level the anchor runs too: the bare AI SDK `streamText` loop (bench/bare-loop.mjs),
 * one process per worker holding as many turns at once, the same message, on the same pacing
 * mock, so the workers' CPU per reply is weighed against it in the same run (BareAnchor).
 *
 * Why a closed loop with both sides at the same time, not bursts with pauses (`bursts`, the
 * method until 2026-11-28) or one side after the other (`apart`): on this benchmark's VM a
 * process is charged CPU for each memory page it touches again after sleeping
 * (bench/probes/page-touch.mjs: 16,384 pages 0.6 ms at once, 58 ms after 1 s, 120 ms after 10 s). Apart,
 * the second side starts after the first's round and its 10 s, cold, and which side went first
 * moved the ratio at 100 by ×0.4 (50 conversations right before each round did not warm it
 * back); together, neither waits. docs/benchmarks.md, "Streamed replies".
 */

export interface StreamOptions {
  runs: number;
  levels: number[];
  ingresses: number;
  workers: number;
  /** Mock model: every call's latency [min, max] ms, and the pause between streamed chunks. */
  latencyMs: [number, number];
  chunkMs: number;
  /** Length of each user message; the reply echoes it through `chat_send`. */
  textChars: number;
  warmupChats: number;
  /**
   * Replies each side measures at a level, at least: a level below this keeps `level`
   * conversations in flight until this many are in (with `bursts`: runs in rounds of `level`
   * conversations, the two sides alternating round by round).
   */
  minRepliesPerLevel: number;
  /** The level's conversations all at once, in rounds with pauses between them, not a closed loop (implies `apart`). */
  bursts: boolean;
  /**
   * The two sides one after the other, alternating which goes first, not both at once. The
   * second then starts after the first's round and its 10 s, cold (see above), and the first
   * right after the warm-up or its own last round: the order moved the ratio at 100 from
   * ×1.06–1.22 to ×1.50–1.63.
   */
  apart: boolean;
  /**
   * Time after each side's last reply whose CPU still counts as that side's: V8 finishes a
   * burst's garbage collection in it (two workers spent 80–320 ms there after 100 replies).
   */
  settleMs: number;
  costReplies: number;
  memoryStreams: number;
  timeoutMs: number;
  /**
   * Flags for node itself, given to both sides of the CPU comparison alike (the workers and the
   * bare loop): a V8 policy weighed on both, never on one (empty by default: Node's defaults).
   */
  nodeArgs: string[];
}

export const STREAM_DEFAULTS: StreamOptions = {
  runs: 3,
  levels: [100, 1000],
  ingresses: 2,
  workers: 2,
  latencyMs: [500, 1500],
  chunkMs: 50,
  textChars: 300,
  warmupChats: 200,
  minRepliesPerLevel: 300,
  bursts: false,
  apart: false,
  settleMs: 10_000,
  costReplies: 100,
  memoryStreams: 1000,
  timeoutMs: 180_000,
  nodeArgs: [],
};

export const STREAM_TARGETS: Record<string, Target> = {
  cpu: {
    metric:
      'worker CPU per streamed reply ÷ bare streamText loop CPU per turn, same mock, same run, at each level',
    comparator: '<=',
    value: 1.15,
  },
};

/** The anchor at one level of a run, and the workers' CPU per reply against it. */
interface AnchorLevel {
  level: number;
  rounds: number;
  /** The sides' order in the first round; they alternate from there. */
  order: string[];
  bare: Side;
  cpuRatio: number;
}

interface StreamRun {
  latency: LatencyLevel[];
  anchor: AnchorLevel[];
  redis: RedisCost;
  memory: IngressMemory;
}

/**
 * The anchor as the workers run: as many bare-loop processes as workers, warmed up with them
 * and kept through every round of the run as the workers are (an idle process's heap is
 * shrunk by V8's memory reducer, and its code aged: the next burst pays to grow and compile
 * them again, on both sides alike). Each round splits the level's turns evenly between them,
 * all at once (BullMQ spreads the workers' share, not always evenly); CPU per turn over all.
 */
class BareAnchor {
  /**
   * Each process with its idle RSS and CPU, measured once after the warm-up, so a round's
   * pauses stay as long as the workers'.
   */
  private constructor(
    private readonly members: Array<{ bare: BareProcess; idle: Pick<Side, 'idleRssMb' | 'idleCpuPct'> }>,
  ) {}

  static async start(stack: Stack, o: StreamOptions, text: string): Promise<BareAnchor> {
    // Warmed up as the workers are: their share of the warm-up conversations, all at once.
    const warmup = Math.ceil(o.warmupChats / o.workers);
    const started = await Promise.allSettled(
      Array.from({ length: o.workers }, () =>
        BareProcess.start({
          mockUrl: stack.mock.url!,
          concurrency: warmup,
          turns: warmup,
          warmup,
          timeoutMs: o.timeoutMs,
          statsOf: (p) => mockStats(stack.mock, `${p}-`),
          text,
          nodeArgs: o.nodeArgs,
        }),
      ),
    );
    const processes = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    try {
      const failed = started.find((s) => s.status === 'rejected');
      if (failed) throw failed.reason;
      return new BareAnchor(
        await Promise.all(processes.map(async (bare) => ({ bare, idle: await bare.idle() }))),
      );
    } catch (err) {
      await Promise.all(processes.map((p) => p.stop()));
      throw err;
    }
  }

  /** `replies` turns split between the processes, `level` in flight in all. */
  async round(level: number, settleMs: number, replies = level): Promise<Side> {
    const n = this.members.length;
    const share = (total: number, i: number) => Math.floor((total + i) / n);
    const sides = await Promise.all(
      this.members.map(async ({ bare, idle }, i) => ({
        ...(await bare.round(share(replies, i), settleMs, share(level, i))),
        ...idle,
      })),
    );
    return combineSides(sides, 'at-once');
  }

  async stop(): Promise<void> {
    await Promise.all(this.members.map(({ bare }) => bare.stop()));
  }
}

export async function benchStream(o: StreamOptions) {
  const text = messageText(o.textChars);
  const together = !o.apart && !o.bursts;
  const redis = await ownRedis();
  progress(`stream: own redis-server on port ${redis.port}`);
  const runs: StreamRun[] = [];
  try {
    for (let run = 0; run < o.runs; run++) {
      const label = `stream run ${run + 1}`;
      const stack = await startStack({
        redisUrl: redis.url,
        ingresses: o.ingresses,
        workers: o.workers,
        workerConcurrency: Math.ceil(Math.max(...o.levels) / o.workers) + 100,
        latencyMs: o.latencyMs,
        chunkMs: o.chunkMs,
        workerNodeArgs: o.nodeArgs,
      });
      const latency: LatencyLevel[] = [];
      const anchor: AnchorLevel[] = [];
      // Both sides warm up at the same time, so neither starts its first round after a longer
      // pause than the other. (Promise.all below handles its rejection; `finally` stops it.)
      const anchorStarted = BareAnchor.start(stack, o, text);
      try {
        const [, bareAnchor] = await Promise.all([warmUp(stack, o.warmupChats, text), anchorStarted]);
        for (const level of o.levels) {
          const rounds = o.bursts ? Math.max(1, Math.ceil(o.minRepliesPerLevel / level)) : 1;
          const replies = o.bursts ? level : Math.max(level, o.minRepliesPerLevel);
          const measured: LatencyLevel[] = [];
          const bare: Side[] = [];
          const chatlaneRound = (r: number) =>
            measureLatency(
              stack,
              redis,
              level,
              text,
              o.timeoutMs,
              `${label} latency ${level}${rounds > 1 ? ` round ${r + 1}/${rounds}` : ''}`,
              o.settleMs,
              replies,
            );
          const bareRound = () => bareAnchor.round(level, o.settleMs, replies);
          for (let r = 0; r < rounds; r++) {
            if (together) {
              const [m, b] = await Promise.all([chatlaneRound(r), bareRound()]);
              measured.push(m);
              bare.push(b);
              await sleep(2000);
            } else {
              for (const side of orderFor(run + r, 'chatlane', 'bare')) {
                if (side === 'chatlane') measured.push(await chatlaneRound(r));
                else bare.push(await bareRound());
                await sleep(2000);
              }
            }
          }
          const pooled = pooledLatency(measured);
          const pooledBare = combineSides(bare, 'in-turn');
          latency.push(pooled);
          const cpuRatio = round(pooled.workerCpuMsPerReply / pooledBare.cpuMsPerTurn);
          anchor.push({
            level,
            rounds,
            order: together ? ['together'] : orderFor(run, 'chatlane', 'bare'),
            bare: pooledBare,
            cpuRatio,
          });
          progress(
            `${label} anchor ${level}: worker CPU ${pooled.workerCpuMsPerReply} ms a reply vs bare loop ` +
              `${pooledBare.cpuMsPerTurn} ms a turn (×${cpuRatio}${rounds > 1 ? `, ${rounds} rounds` : ''})`,
          );
        }
      } finally {
        await anchorStarted.then(
          (a) => a.stop(),
          () => undefined,
        );
        await stack.stop();
        await deletePrefix(redis.admin, stack.prefix);
      }
      const cost = await measureRedisCost(redis, {
        replies: o.costReplies,
        chunkMs: o.chunkMs,
        latencyMs: o.latencyMs,
        text,
        timeoutMs: o.timeoutMs,
        label: `${label} redis`,
      });
      const memory = await measureIngressMemory(redis.url, {
        streams: o.memoryStreams,
        text,
        timeoutMs: o.timeoutMs,
        label: `${label} memory`,
      });
      runs.push({ latency, anchor, redis: cost, memory });
    }
  } finally {
    await redis.stop();
  }

  const anchorsAt = (level: string) => runs.flatMap((r) => r.anchor.filter((a) => String(a.level) === level));
  const byLevel: Record<string, LatencyLevel[]> = {};
  for (const r of runs) for (const l of r.latency) pushTo(byLevel, l.level, l);
  const latency = Object.fromEntries(
    Object.entries(byLevel).map(([level, ls]) => [
      level,
      {
        p50Ms: median(ls.map((l) => l.p50Ms)),
        p99Ms: median(ls.map((l) => l.p99Ms)),
        maxMs: median(ls.map((l) => l.maxMs)),
        workerCpuMsPerReply: median(ls.map((l) => l.workerCpuMsPerReply)),
        complete: ls.map((l) => l.complete),
        peakConcurrentStreams: median(ls.map((l) => l.peakConcurrentStreams)),
        clientCpuPct: median(ls.map((l) => l.clientCpuPct)),
        hostBusyPct: median(ls.map((l) => l.hostBusyPct)),
        bareCpuMsPerTurn: median(anchorsAt(level).map((a) => a.bare.cpuMsPerTurn)),
        cpuRatio: median(anchorsAt(level).map((a) => a.cpuRatio)),
      },
    ]),
  );
  const perReply = (pick: (r: RedisCost) => PhaseCost) =>
    Object.fromEntries(
      Object.keys(pick(runs[0]!.redis).perReply).map((k) => [
        k,
        median(runs.map((r) => pick(r.redis).perReply[k as keyof PhaseCost['perReply']])),
      ]),
    );
  return {
    description:
      `latency: ${o.ingresses} ingress and ${o.workers} worker processes (dist/cli.js) on a redis-server of the ` +
      `benchmark's own; the mock model answers each call after ${o.latencyMs[0]}–${o.latencyMs[1]} ms and streams ` +
      `its chunks ${o.chunkMs} ms apart (a ${o.textChars}-character reply through chat_send, 16 characters per chunk); ` +
      `N conversations over POST /v1/ui (per-chat browser tokens), round-robin over the ingresses, ` +
      (o.bursts
        ? `opened at once in rounds of N until each side has ${o.minRepliesPerLevel} replies at the level, `
        : `N kept in flight (each that ends opens the next) until max(N, ${o.minRepliesPerLevel}) replies, `) +
      `after ${o.warmupChats} warm-up conversations; latency = client's first text-delta − the mock's write of the ` +
      `reply's first content chunk (both performance.timeOrigin + performance.now(), same host). The client is ` +
      `this process (raw HTTP, hand-parsed SSE) on the same 2 cores as every server process: its CPU and the ` +
      `host's busy share are in each level. redis: ${o.costReplies} turns at once through the messages API, then ` +
      `through /v1/ui, each role behind a byte-counting proxy, commands named by MONITOR, idle traffic subtracted. ` +
      `anchor: bench/bare-loop.mjs (the AI SDK streamText tool loop, same provider package and chat_send ` +
      `schema, no queue, no store, no reply stream) against the same mock, as many processes as workers, ` +
      `warmed up with the workers and kept through every round of the run, each round's turns split ` +
      `between them, ${o.bursts ? 'all at once' : 'N in flight in all'}, the same message, ` +
      `${together ? 'both sides at the same time' : 'the two sides alternating round by round'}; CPU per turn from /proc over all of them, each side's ${o.settleMs / 1000} s after its ` +
      `last reply included${o.nodeArgs.length > 0 ? `; both sides ran node with ${o.nodeArgs.join(' ')}` : ''}. ` +
      `memory: ${o.memoryStreams} /v1/ui responses on one ingress following replies whose model call waits ` +
      `10 min; RSS and heap used from /metrics (least of 8 samples), after − before, per stream.`,
    settings: o,
    runs,
    median: {
      latency,
      redis: {
        ui: perReply((r) => r.ui),
        api: perReply((r) => r.api),
        replyStreamEntries: median(runs.map((r) => r.redis.replyStream.entries)),
        replyStreamMemoryBytes: median(runs.map((r) => r.redis.replyStream.memoryBytes)),
        clientChunksPerReply: median(runs.map((r) => r.redis.clientChunksPerReply)),
      },
      memory: {
        rssKiBPerStream: round(median(runs.map((r) => r.memory.rssBytesPerStream)) / 1024, 1),
        heapKiBPerStream: round(median(runs.map((r) => r.memory.heapBytesPerStream)) / 1024, 1),
        following: runs.map((r) => r.memory.following),
      },
    },
    targets: STREAM_TARGETS,
    meetsTarget: {
      cpu: Object.values(latency).every((l) => meets(STREAM_TARGETS.cpu!, l.cpuRatio)),
    },
  };
}
