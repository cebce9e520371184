import autocannon from 'autocannon';
import { Queue } from 'bullmq';
import { QUEUES, queueOptions } from '../src/shared/jobs.js';
import {
  adminRedis,
  type CpuShare,
  cpuMeter,
  deletePrefix,
  medianOf,
  meets,
  progress,
  REDIS_URL,
  randomPrefix,
  round,
  spawnServer,
  type Target,
} from './lib/util.js';

/**
 * POST /v1/chats/:chatKey/messages throughput of the real ingress (`chatlane ingress`,
 * src/cli.ts) against two anchors, each in its own process, in the same run, the order rotated
 * each run: bench/anchors/ingress-server.ts (Fastify + RPUSH + the turn's deduplicated add with
 * chatlane's Redis options) and bench/anchors/least-work-server.ts (Fastify + RPUSH + a plain
 * `Queue.add`: the least a message endpoint with a queue can do, two round trips as chatlane).
 */

export interface IngressOptions {
  runs: number;
  durationS: number;
  warmupS: number;
  connections: number;
  chats: number;
  /** Extra environment of the chatlane ingress (`--tracing`: an OTLP endpoint). */
  env?: Record<string, string>;
}

export const INGRESS_DEFAULTS: IngressOptions = {
  runs: 3,
  durationS: 10,
  warmupS: 2,
  connections: 50,
  chats: 1000,
};

export const INGRESS_TARGET: Target = {
  metric: 'ratio = chatlane req/s ÷ anchor req/s',
  comparator: '>=',
  value: 0.9,
};

export const INGRESS_LEAST_WORK_TARGET: Target = {
  metric: 'leastWorkRatio = chatlane req/s ÷ least-work anchor req/s',
  comparator: '>=',
  value: 0.8,
};

type Side = 'leastWork' | 'anchor' | 'chatlane';
const SIDES: readonly Side[] = ['leastWork', 'anchor', 'chatlane'];
const ANCHOR_FILES: Record<Exclude<Side, 'chatlane'>, string> = {
  anchor: 'bench/anchors/ingress-server.ts',
  leastWork: 'bench/anchors/least-work-server.ts',
};

export interface IngressMeasurement {
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  total2xx: number;
  durationS: number;
  /** CPU over the measurement: load generator (this process), server, Redis. */
  cpu: CpuShare;
  /** Server and Redis CPU per completed request, in µs: throughput with the noise of neighbours removed. */
  serverCpuUsPerReq: number;
  redisCpuUsPerReq: number;
}

export interface IngressRun {
  order: Side[];
  leastWork: IngressMeasurement;
  anchor: IngressMeasurement;
  chatlane: IngressMeasurement;
  ratio: number;
  /** chatlane req/s ÷ least-work anchor req/s. */
  leastWorkRatio: number;
  leastWorkCpuRatio: number;
  /** anchor server CPU/request ÷ chatlane server CPU/request: same sense as `ratio`, 1 = as cheap as the anchor. */
  cpuRatio: number;
}

// A realistic chat message: a sentence of text plus the metadata a channel adapter sends.
const TEXT = 'Hi, could you remind me what we decided about the deployment window for Friday?';

function load(url: string, opts: IngressOptions, tag: string, durationS: number): Promise<autocannon.Result> {
  let n = 0;
  return autocannon({
    url,
    connections: opts.connections,
    duration: durationS,
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // Called for every request: rotate over the chats and give each message its own id,
        // so the ingest script's dedup accepts every one.
        setupRequest: (req) => {
          const i = n++;
          const chatKey = `bench-chat-${i % opts.chats}`;
          return {
            ...req,
            path: `/v1/chats/${chatKey}/messages`,
            body: JSON.stringify({
              id: `${tag}-${i}`,
              text: TEXT,
              metadata: { userId: `u${i % opts.chats}`, username: 'bench', channel: 'api' },
            }),
          };
        },
      },
    ],
  });
}

function summarize(result: autocannon.Result, cpu: CpuShare): IngressMeasurement {
  return {
    reqPerSec: round(result.requests.average, 1),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    total2xx: result['2xx'],
    durationS: result.duration,
    cpu,
    serverCpuUsPerReq: round(((cpu.serverCpuS ?? Number.NaN) * 1e6) / result.requests.total, 1),
    redisCpuUsPerReq: round((cpu.redisCpuS * 1e6) / result.requests.total, 1),
  };
}

async function measure(side: Side, opts: IngressOptions, run: number): Promise<IngressMeasurement> {
  const prefix = randomPrefix(`ing-${side}`);
  const server =
    side === 'chatlane'
      ? await spawnServer({
          name: 'chatlane ingress',
          // The real CLI from source through the same loader as the anchor: dist/ is rebuilt
          // (rm -rf) by anyone running `npm test` on this shared tree, mid-benchmark.
          args: ['--import', 'tsx', 'src/cli.ts', 'ingress'],
          env: { REDIS_URL, CHATLANE_PREFIX: prefix, LOG_LEVEL: 'warn', ...opts.env },
          readyPath: '/readyz',
        })
      : await spawnServer({
          name: side,
          args: ['--import', 'tsx', ANCHOR_FILES[side]],
          env: { REDIS_URL, BENCH_PREFIX: prefix },
          readyPath: '/healthz',
        });
  const admin = adminRedis();
  try {
    // JIT and connection warm-up, not recorded.
    if (opts.warmupS > 0) await load(server.url, opts, `${prefix}-w`, opts.warmupS);
    progress(`ingress run ${run + 1}: ${side} ${opts.durationS}s × ${opts.connections} connections`);
    const stopMeter = await cpuMeter(admin, server.pid);
    const raw = await load(server.url, opts, `${prefix}-m`, opts.durationS);
    const result = summarize(raw, await stopMeter());
    progress(
      `ingress run ${run + 1}: ${side} ${result.reqPerSec} req/s, p99 ${result.p99Ms} ms, ` +
        `cpu ${JSON.stringify(result.cpu)}`,
    );
    return result;
  } finally {
    await server.stop();
    // No worker consumes the turns queue here: clear it and the chats so every measurement
    // starts on the same near-empty Redis.
    const queue = new Queue(QUEUES.turns, queueOptions(prefix, QUEUES.turns, admin));
    await queue
      .obliterate({ force: true })
      .catch((err: unknown) => progress(`obliterate failed: ${String(err)}`));
    await queue.close();
    await deletePrefix(admin, prefix);
    admin.disconnect();
  }
}

export async function benchIngress(opts: IngressOptions) {
  const runs: IngressRun[] = [];
  for (let run = 0; run < opts.runs; run++) {
    const measured: Partial<Record<Side, IngressMeasurement>> = {};
    // Each side goes first, second and third once in three runs.
    const order = SIDES.map((_, i) => SIDES[(i + run) % SIDES.length]!);
    for (const side of order) {
      try {
        measured[side] = await measure(side, opts, run);
      } catch (err) {
        // A server that failed to start on a busy shared box gets one more chance.
        progress(`ingress run ${run + 1}: ${side} failed (${(err as Error).message}); retrying once`);
        measured[side] = await measure(side, opts, run);
      }
    }
    const anchor = measured.anchor!;
    const chatlane = measured.chatlane!;
    const leastWork = measured.leastWork!;
    runs.push({
      order,
      leastWork,
      anchor,
      chatlane,
      ratio: round(chatlane.reqPerSec / anchor.reqPerSec),
      cpuRatio: round(anchor.serverCpuUsPerReq / chatlane.serverCpuUsPerReq),
      leastWorkRatio: round(chatlane.reqPerSec / leastWork.reqPerSec),
      leastWorkCpuRatio: round(leastWork.serverCpuUsPerReq / chatlane.serverCpuUsPerReq),
    });
  }
  const ratio = medianOf(runs, (r) => r.ratio);
  const leastWorkRatio = medianOf(runs, (r) => r.leastWorkRatio);
  return {
    description:
      `POST /v1/chats/:chatKey/messages over ${opts.chats} chats, ${opts.connections} connections, ` +
      `${opts.durationS}s per measurement after ${opts.warmupS}s warm-up; anchor = Fastify + RPUSH + enqueueTurn; ` +
      'leastWork = Fastify + RPUSH + a plain Queue.add',
    settings: opts,
    runs,
    median: {
      anchorReqPerSec: medianOf(runs, (r) => r.anchor.reqPerSec),
      chatlaneReqPerSec: medianOf(runs, (r) => r.chatlane.reqPerSec),
      anchorP50Ms: medianOf(runs, (r) => r.anchor.p50Ms),
      anchorP99Ms: medianOf(runs, (r) => r.anchor.p99Ms),
      chatlaneP50Ms: medianOf(runs, (r) => r.chatlane.p50Ms),
      chatlaneP99Ms: medianOf(runs, (r) => r.chatlane.p99Ms),
      chatlaneNon2xx: medianOf(runs, (r) => r.chatlane.non2xx),
      anchorNon2xx: medianOf(runs, (r) => r.anchor.non2xx),
      anchorServerCpuPct: medianOf(runs, (r) => r.anchor.cpu.serverProcessPct ?? Number.NaN),
      chatlaneServerCpuPct: medianOf(runs, (r) => r.chatlane.cpu.serverProcessPct ?? Number.NaN),
      anchorRedisCpuPct: medianOf(runs, (r) => r.anchor.cpu.redisPct),
      chatlaneRedisCpuPct: medianOf(runs, (r) => r.chatlane.cpu.redisPct),
      loadGeneratorCpuPct: medianOf(runs, (r) => r.chatlane.cpu.benchProcessPct),
      anchorServerCpuUsPerReq: medianOf(runs, (r) => r.anchor.serverCpuUsPerReq),
      chatlaneServerCpuUsPerReq: medianOf(runs, (r) => r.chatlane.serverCpuUsPerReq),
      anchorRedisCpuUsPerReq: medianOf(runs, (r) => r.anchor.redisCpuUsPerReq),
      chatlaneRedisCpuUsPerReq: medianOf(runs, (r) => r.chatlane.redisCpuUsPerReq),
      cpuRatio: medianOf(runs, (r) => r.cpuRatio),
      ratio,
      leastWorkReqPerSec: medianOf(runs, (r) => r.leastWork.reqPerSec),
      leastWorkP50Ms: medianOf(runs, (r) => r.leastWork.p50Ms),
      leastWorkP99Ms: medianOf(runs, (r) => r.leastWork.p99Ms),
      leastWorkServerCpuUsPerReq: medianOf(runs, (r) => r.leastWork.serverCpuUsPerReq),
      leastWorkRedisCpuUsPerReq: medianOf(runs, (r) => r.leastWork.redisCpuUsPerReq),
      leastWorkCpuRatio: medianOf(runs, (r) => r.leastWorkCpuRatio),
      leastWorkRatio,
    },
    target: INGRESS_TARGET,
    meetsTarget: meets(INGRESS_TARGET, ratio),
    leastWorkTarget: INGRESS_LEAST_WORK_TARGET,
    meetsLeastWorkTarget: meets(INGRESS_LEAST_WORK_TARGET, leastWorkRatio),
  };
}
