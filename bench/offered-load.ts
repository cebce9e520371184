import { LIMITS, parseLoadtestArgs } from '../src/loadtest/options.js';
import { runLoadtest } from '../src/loadtest/run.js';
import { type RoleProcess, startRole } from '../test/helpers/processes.js';
import { startMock } from './lib/fleet.js';
import {
  adminRedis,
  deletePrefix,
  median,
  progress,
  pushTo,
  REDIS_URL,
  randomPrefix,
  round,
} from './lib/util.js';

/**
 * Throughput and latency against offered load: `chatlane loadtest` (open model, bursts) at
 * rising message rates against one ingress and one worker process with the mock model
 * answering in 200 ms. Where answered messages/s stops following the offered rate the stack
 * is saturated; the reply p99 shows what that costs a user. Feeds the chart in docs/benchmarks.md.
 */

export interface OfferedLoadOptions {
  runs: number;
  rates: number[];
  durationS: number;
  messagesPerChat: number;
  latencyMs: number;
  workers: number;
}

export const OFFERED_LOAD_DEFAULTS: OfferedLoadOptions = {
  runs: 3,
  rates: [10, 20, 40, 80, 160, 320],
  durationS: 20,
  messagesPerChat: 4,
  latencyMs: 200,
  workers: 1,
};

export interface OfferedPoint {
  offered: number;
  acksPerSec: number;
  answeredPerSec: number;
  ackP99Ms: number;
  replyP50Ms: number;
  replyP99Ms: number;
  messagesPerTurn: number;
  replyResolutionMs: number;
  clientCpuPct: number;
  ok: boolean;
}

async function runOne(
  ingress: RoleProcess,
  mock: RoleProcess,
  opts: OfferedLoadOptions,
  rate: number,
  seed: number,
  durationS: number,
) {
  const chats = Math.max(1, Math.round((rate * durationS) / opts.messagesPerChat));
  const parsed = parseLoadtestArgs([
    '--url',
    ingress.url!,
    '--mock-url',
    mock.url!,
    '--rate',
    String(rate),
    '--chats',
    String(chats),
    '--messages',
    String(opts.messagesPerChat),
    '--duration',
    String(durationS * 2),
    '--drain',
    '120',
    '--seed',
    String(seed),
    // Every chat's replies seen on its live stream (as they are pushed), none polled.
    '--replies',
    'stream',
    '--max-streams',
    String(Math.min(chats, LIMITS.maxStreams)),
    '--progress',
    'off',
  ]);
  if (parsed === 'help') throw new Error('unreachable');
  return (await runLoadtest(parsed)).report;
}

export async function benchOfferedLoad(opts: OfferedLoadOptions) {
  const prefix = randomPrefix('offered');
  const mock = await startMock(opts.latencyMs);
  const procs: RoleProcess[] = [mock];
  const byRate: Record<string, OfferedPoint[]> = {};
  try {
    const env = { REDIS_URL, CHATLANE_PREFIX: prefix, LLM_BASE_URL: mock.url!, LLM_MODEL: 'mock' };
    const ingress = await startRole('ingress', env, { timeoutMs: 60_000 });
    procs.push(ingress);
    for (let i = 0; i < opts.workers; i++) procs.push(await startRole('worker', env, { timeoutMs: 60_000 }));
    // A short unrecorded run first, so the first rate does not pay the processes' cold start.
    await runOne(ingress, mock, opts, opts.rates[0]!, 0, 3);
    for (let run = 0; run < opts.runs; run++) {
      for (const rate of opts.rates) {
        const r = await runOne(ingress, mock, opts, rate, run + 1, opts.durationS);
        const point: OfferedPoint = {
          offered: rate,
          acksPerSec: r.acks.perSecond,
          answeredPerSec: r.replies.perSecondWhileSending,
          ackP99Ms: r.acks.latencyMs.p99,
          replyP50Ms: r.replies.latencyMs.p50,
          replyP99Ms: r.replies.latencyMs.p99,
          messagesPerTurn: r.turns.messagesPerTurn,
          replyResolutionMs: r.replies.resolutionMs,
          clientCpuPct: r.client.cpuPctOfOneCore,
          ok: r.ok,
        };
        pushTo(byRate, rate, point);
        progress(
          `offered ${rate} msg/s run ${run + 1}: answered ${point.answeredPerSec}/s, reply p50 ${point.replyP50Ms} ms ` +
            `p99 ${point.replyP99Ms} ms, ${point.ok ? 'checks ok' : 'CHECKS FAILED'}`,
        );
      }
    }
  } finally {
    await Promise.allSettled(procs.map((p) => p.kill('SIGKILL')));
    const admin = adminRedis();
    await deletePrefix(admin, prefix);
    admin.disconnect();
  }
  const points = Object.entries(byRate).map(([rate, runs]) => ({
    offered: Number(rate),
    answeredPerSec: median(runs.map((p) => p.answeredPerSec)),
    acksPerSec: median(runs.map((p) => p.acksPerSec)),
    replyP50Ms: median(runs.map((p) => p.replyP50Ms)),
    replyP99Ms: median(runs.map((p) => p.replyP99Ms)),
    ackP99Ms: median(runs.map((p) => p.ackP99Ms)),
    messagesPerTurn: median(runs.map((p) => p.messagesPerTurn)),
    replyResolutionMs: median(runs.map((p) => p.replyResolutionMs)),
    ok: runs.every((p) => p.ok),
  }));
  return {
    description:
      `chatlane loadtest (open model, 20 % bursts of 3, ${opts.messagesPerChat} messages per chat, rate × ` +
      `${opts.durationS} s of messages) against one ingress and ${opts.workers} worker process(es) ` +
      `(WORKER_CONCURRENCY 32) with the mock model answering in ${opts.latencyMs} ms; answered/s = slope of ` +
      'the cumulative count of answered messages over the last three quarters of the sending phase (the ' +
      "rate under load); reply latency = send → reply seen on the chat's live stream (SSE)",
    settings: opts,
    runs: byRate,
    points,
    saturation: round(Math.max(...points.map((p) => p.answeredPerSec)), 1),
  };
}
