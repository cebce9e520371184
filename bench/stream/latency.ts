import { randomBytes } from 'node:crypto';
import { hostBusyPct, hostCpuTimes } from '../lib/fleet.js';
import { percentile, processCpuSeconds, progress, redisCpuSeconds, round, sleep } from '../lib/util.js';
import { clock, type UiTurn, type UiTurnHandle, uiTurn } from './client.js';
import type { OwnRedis, Stack } from './stack.js';
import { webTokens } from './stack.js';

/**
 * Time from the model's first token to the client's first `text-delta`: N conversations
 * in flight over `/v1/ui` (a closed loop: each one that ends opens the next, until a round's
 * replies), spread round-robin over the ingresses, each with its own browser token. The mock
 * stamps the moment it writes a reply's first content event (`/first-content`), the client
 * the moment its first `text-delta` arrives, on one clock (`performance.timeOrigin +
 * performance.now()`, same host).
 */

export interface LatencyLevel {
  /** Conversations in flight. */
  level: number;
  /** Replies asked for (conversations opened). */
  replies: number;
  /** Replies that completed with the expected text. */
  complete: number;
  /** Replies with a latency (a first content stamp and a first text-delta). */
  measured: number;
  failures: string[];
  p50Ms: number;
  p99Ms: number;
  minMs: number;
  maxMs: number;
  /** Most replies streaming at once (first text-delta to `[DONE]`, as the client saw them). */
  peakConcurrentStreams: number;
  seconds: number;
  /** CPU the bench process (the client) took over the level, % of one core. */
  clientCpuPct: number;
  /** The whole machine's CPU busy share over the level (neighbours included), %. */
  hostBusyPct: number;
  ingressCpuS: number[];
  workerCpuS: number[];
  /** Worker CPU (all workers) per reply of the level, ms. */
  workerCpuMsPerReply: number;
  /** The mock model pacing every stream's chunks shares the same cores. */
  mockCpuS: number;
  redisCpuS: number;
  /** Each measured reply's latency, ms (pooled over rounds; left out of the report). */
  samples?: number[];
  /** Measurements of `level` conversations pooled here (several at a small level). */
  rounds?: number;
}

function peakOverlap(intervals: Array<[number, number]>): number {
  const points = intervals.flatMap(
    ([a, b]): Array<[number, number]> => [
      [a, 1],
      [b, -1],
    ],
  );
  points.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let open = 0;
  let peak = 0;
  for (const [, d] of points) {
    open += d;
    peak = Math.max(peak, open);
  }
  return peak;
}

/**
 * `replies` conversations, `level` in flight (all at once when they are equal); every reply
 * read to its end (or `timeoutMs`).
 */
export async function measureLatency(
  stack: Stack,
  redis: OwnRedis,
  level: number,
  text: string,
  timeoutMs: number,
  label: string,
  settleMs = 0,
  replies = level,
): Promise<LatencyLevel> {
  const tag = `${stack.prefix}-l${level}-${randomBytes(3).toString('hex')}`;
  const keys = Array.from({ length: replies }, (_, i) => `${tag}-${i}`);
  const tokens = await webTokens(keys);
  const pids = [...stack.ingresses, ...stack.workers, stack.mock].map((p) => p.pid);
  const cpu0 = pids.map((pid) => processCpuSeconds(pid) ?? 0);
  const redis0 = await redisCpuSeconds(redis.admin);
  const host0 = hostCpuTimes();
  const self0 = process.cpuUsage();
  const t0 = clock();

  const handles: UiTurnHandle[] = [];
  let next = 0;
  let stopped = false;
  const open = (i: number) => {
    const chatKey = keys[i]!;
    const url = stack.ingresses[i % stack.ingresses.length]!.url!;
    const handle = uiTurn(url, chatKey, tokens.get(chatKey)!, `m-${chatKey}`, text);
    handles.push(handle);
    return handle.result;
  };
  const all = Promise.all(
    Array.from({ length: Math.min(level, replies) }, async () => {
      const mine: UiTurn[] = [];
      while (next < replies && !stopped) mine.push(await open(next++));
      return mine;
    }),
  ).then((lanes) => lanes.flat());
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const outcome = await Promise.race([all, timedOut]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    progress(`${label}: not every reply ended within ${timeoutMs} ms; cancelling the rest`);
    stopped = true;
    for (const h of handles) h.cancel();
  }
  const turns: UiTurn[] = await all;
  const seconds = (clock() - t0) / 1000;
  const self = process.cpuUsage(self0);
  const busy = hostBusyPct(host0);
  // The processes' CPU counts the seconds after the last reply too: V8 finishes the burst's
  // garbage collection there (the anchor's is counted alike).
  await sleep(settleMs);
  const cpu1 = pids.map((pid) => processCpuSeconds(pid) ?? 0);
  const redis1 = await redisCpuSeconds(redis.admin);

  const firstContent = await stack.firstContent(`${tag}-`);
  const expected = `echo: ${text}`;
  const failures: string[] = [];
  const latencies: number[] = [];
  const streaming: Array<[number, number]> = [];
  let complete = 0;
  for (const t of turns) {
    const modelAt = firstContent[t.chatKey]?.[0];
    if (t.error || t.text !== expected) {
      if (failures.length < 5)
        failures.push(
          `${t.chatKey}: ${t.error ?? `text ${JSON.stringify(t.text.slice(0, 40))}`}; last: ${t.tail.join(' | ')}`,
        );
    } else complete++;
    if (modelAt !== undefined && t.firstDeltaAt !== undefined) latencies.push(t.firstDeltaAt - modelAt);
    if (t.firstDeltaAt !== undefined && t.doneAt !== undefined) streaming.push([t.firstDeltaAt, t.doneAt]);
  }
  const failed = replies - complete;
  if (failed > 0) failures.unshift(`${failed} of ${replies} replies incomplete or wrong`);
  const result: LatencyLevel = {
    level,
    replies,
    complete,
    measured: latencies.length,
    failures,
    p50Ms: round(percentile(latencies, 50), 2),
    p99Ms: round(percentile(latencies, 99), 2),
    minMs: round(Math.min(...latencies), 2),
    maxMs: round(Math.max(...latencies), 2),
    peakConcurrentStreams: peakOverlap(streaming),
    seconds: round(seconds),
    clientCpuPct: round(((self.user + self.system) / 1e6 / seconds) * 100, 1),
    hostBusyPct: busy,
    ingressCpuS: cpu1.slice(0, stack.ingresses.length).map((v, i) => round(v - cpu0[i]!)),
    workerCpuS: cpu1
      .slice(stack.ingresses.length, -1)
      .map((v, i) => round(v - cpu0[i + stack.ingresses.length]!)),
    workerCpuMsPerReply: 0,
    mockCpuS: round(cpu1.at(-1)! - cpu0.at(-1)!),
    redisCpuS: round(redis1 - redis0),
    samples: latencies,
  };
  result.workerCpuMsPerReply = round((result.workerCpuS.reduce((a, b) => a + b, 0) * 1000) / replies, 2);
  progress(
    `${label}: first token → first text-delta p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms ` +
      `(${result.measured}/${replies} measured, ${complete} complete, peak ${result.peakConcurrentStreams} streaming, ` +
      `client ${result.clientCpuPct} % CPU, host ${busy} % busy)`,
  );
  return result;
}

const sumOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/**
 * Rounds of one level pooled as one measurement: latency percentiles over every reply, CPU
 * summed and divided by every reply, so a small level is not judged on one round's GC pauses.
 */
export function pooledLatency(rounds: LatencyLevel[]): LatencyLevel {
  const samples = rounds.flatMap((r) => r.samples ?? []);
  const replies = sumOf(rounds.map((r) => r.replies));
  const perProcess = (pick: (r: LatencyLevel) => number[]) =>
    pick(rounds[0]!).map((_, i) => round(sumOf(rounds.map((r) => pick(r)[i] ?? 0))));
  const workerCpuS = perProcess((r) => r.workerCpuS);
  const mean = (pick: (r: LatencyLevel) => number) => round(sumOf(rounds.map(pick)) / rounds.length, 1);
  return {
    level: rounds[0]!.level,
    replies,
    rounds: rounds.length,
    complete: sumOf(rounds.map((r) => r.complete)),
    measured: samples.length,
    failures: rounds.flatMap((r) => r.failures).slice(0, 5),
    p50Ms: round(percentile(samples, 50), 2),
    p99Ms: round(percentile(samples, 99), 2),
    minMs: round(Math.min(...samples), 2),
    maxMs: round(Math.max(...samples), 2),
    peakConcurrentStreams: Math.max(...rounds.map((r) => r.peakConcurrentStreams)),
    seconds: round(sumOf(rounds.map((r) => r.seconds))),
    clientCpuPct: mean((r) => r.clientCpuPct),
    hostBusyPct: mean((r) => r.hostBusyPct),
    ingressCpuS: perProcess((r) => r.ingressCpuS),
    workerCpuS,
    workerCpuMsPerReply: round((sumOf(workerCpuS) * 1000) / replies, 2),
    mockCpuS: round(sumOf(rounds.map((r) => r.mockCpuS))),
    redisCpuS: round(sumOf(rounds.map((r) => r.redisCpuS))),
  };
}

/** Conversations run to their end before a measurement, so no cold path is measured. */
export async function warmUp(stack: Stack, count: number, text: string): Promise<void> {
  const keys = Array.from(
    { length: count },
    (_, i) => `${stack.prefix}-warm-${randomBytes(3).toString('hex')}-${i}`,
  );
  const tokens = await webTokens(keys);
  const turns = await Promise.all(
    keys.map(
      (k, i) =>
        uiTurn(stack.ingresses[i % stack.ingresses.length]!.url!, k, tokens.get(k)!, `m-${k}`, text).result,
    ),
  );
  const bad = turns.filter((t) => !t.done);
  if (bad.length > 0) throw new Error(`warm-up: ${bad.length} of ${count} replies failed: ${bad[0]!.error}`);
  await sleep(1000);
}
