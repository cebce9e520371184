import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Queue } from 'bullmq';
import { createQueue, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { closeRedis, createRedis, waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { type RoleProcess, startRole } from '../../test/helpers/processes.js';
import {
  adminRedis,
  deletePrefix,
  freePort,
  processCpuSeconds,
  progress,
  REDIS_URL,
  randomPrefix,
  redisCpuSeconds,
  round,
  seedChats,
  sleep,
} from './util.js';

/**
 * Real processes under load for the process-level benchmarks: the mock model and worker
 * processes (`dist/cli.js`), chats seeded through the store as the ingress writes them, and
 * what /proc says each process spent (CPU) and held (RSS) while they worked.
 */

/** `chunkMs`: the pause between a response's streamed chunks (none when absent: all at once). */
export async function startMock(latencyMs: number, chunkMs?: number): Promise<RoleProcess> {
  return startRole(
    'mock-llm',
    {
      MOCK_LLM_PORT: '0',
      MOCK_LLM_LATENCY_MS: String(latencyMs),
      ...(chunkMs !== undefined && { MOCK_LLM_CHUNK_MS: String(chunkMs) }),
    },
    { timeoutMs: 60_000 },
  );
}

export async function mockStats(
  mock: RoleProcess,
  chatKeyPrefix: string,
): Promise<{ requests: number; inFlight: number; maxInFlightPerChat: number }> {
  const base = mock.url!.replace(/\/v1\/?$/, '');
  const res = await fetch(`${base}/stats?chatKeyPrefix=${encodeURIComponent(chatKeyPrefix)}`);
  return (await res.json()) as { requests: number; inFlight: number; maxInFlightPerChat: number };
}

const BARE_LOOP = fileURLToPath(new URL('../bare-loop.mjs', import.meta.url));

export interface BareLoopOptions {
  mockUrl: string;
  concurrency: number;
  turns: number;
  warmup: number;
  /** Its chat keys are `<prefix>-w<n>` and `<prefix>-c<n>`: the mock's stats per side. */
  prefix: string;
  /** Flags for node itself (profilers, preloads). */
  nodeArgs?: string[];
  env?: Record<string, string>;
}

/**
 * bench/bare-loop.mjs as its own plain-node process, the anchor the worker is compared with:
 * it prints `ready` after its warm-up, runs its turns on `go`, prints `done` (its header).
 */
export function spawnBareLoop(o: BareLoopOptions): ChildProcess {
  return spawn(process.execPath, [...(o.nodeArgs ?? []), BARE_LOOP], {
    env: {
      ...process.env,
      ...o.env,
      BARE_MOCK_URL: o.mockUrl,
      BARE_CONCURRENCY: String(o.concurrency),
      BARE_TURNS: String(o.turns),
      BARE_WARMUP: String(o.warmup),
      BARE_CHAT_PREFIX: o.prefix,
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
}

/** What each process spends doing nothing for `ms` (timers, polls), % of a core. */
export async function idleCpuPct(pids: number[], ms = 3000): Promise<number[]> {
  const before = pids.map((pid) => processCpuSeconds(pid) ?? 0);
  await sleep(ms);
  return pids.map((pid, i) => round((((processCpuSeconds(pid) ?? 0) - before[i]!) * 100_000) / ms, 2));
}

/** Busy and total jiffies of the whole machine (/proc/stat), for "was the host saturated". */
export function hostCpuTimes(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  // idle + iowait are the not-busy fields.
  return { busy: total - (f[3] ?? 0) - (f[4] ?? 0), total };
}

export function hostBusyPct(from: { busy: number; total: number }): number {
  const now = hostCpuTimes();
  return round(((now.busy - from.busy) / Math.max(1, now.total - from.total)) * 100, 1);
}

/** Resident and peak-resident memory of a process in MB, from /proc/<pid>/status. */
export function memoryOf(pid: number): { rssMb: number; hwmMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { rssMb: round(kb('VmRSS') / 1024, 1), hwmMb: round(kb('VmHWM') / 1024, 1) };
}

/** Samples RSS of the given processes every `everyMs` until stopped; returns each one's peak (MB). */
export function rssSampler(pids: number[], everyMs = 100): { stop(): number[] } {
  const peaks = pids.map(() => 0);
  const sample = () => {
    pids.forEach((pid, i) => {
      try {
        peaks[i] = Math.max(peaks[i]!, memoryOf(pid).rssMb);
      } catch {
        // The process is gone; its peak so far stands.
      }
    });
  };
  sample();
  const timer = setInterval(sample, everyMs);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return peaks;
    },
  };
}

/** The worker side's chats are `<randomPrefix(FLEET_LABEL)>-w<i>` (warm-up) and `-c<i>`. */
export const FLEET_LABEL = 'fleet';
/**
 * bench/bare-loop.mjs names its chats alike, under a label of the same length: the mock echoes
 * each chat's message, which names the chat, so both sides get model output of one size.
 */
export const ANCHOR_LABEL = 'anchr';

/** A prefix, a store and the turns queue as the ingress has them. */
export class BenchChats {
  readonly prefix = randomPrefix(FLEET_LABEL);
  readonly redis = createRedis(REDIS_URL, 'worker', 'chatlane:bench-fleet');
  readonly store = new ChatStore(this.redis, { prefix: this.prefix, maxEvents: 1000 });
  readonly turns: Queue<TurnJob> = createQueue<TurnJob>(this.prefix, QUEUES.turns, this.redis);

  async ready(): Promise<void> {
    await waitReady(this.redis, 10_000);
  }

  /** `ingest` + `enqueueTurn` per message, at most `width` chats at once (not measured). */
  seed(chatKeys: string[], messagesPerChat: number, width = 200, text?: string): Promise<void> {
    return seedChats(this.store, this.turns, chatKeys, messagesPerChat, width, text);
  }

  /** Chats whose inbox is not empty yet. */
  async pending(chatKeys: string[]): Promise<number> {
    let left = 0;
    for (let i = 0; i < chatKeys.length; i += 1000) {
      const p = this.redis.pipeline();
      for (const c of chatKeys.slice(i, i + 1000)) p.xlen(this.store.keys(c).inbox);
      for (const [, n] of (await p.exec()) ?? []) if (Number(n) > 0) left++;
    }
    return left;
  }

  /** Redis time (epoch ms) of the last `turn.committed` over these chats. */
  async lastCommitAt(chatKeys: string[]): Promise<number> {
    let last = 0;
    for (let i = 0; i < chatKeys.length; i += 1000) {
      const p = this.redis.pipeline();
      for (const c of chatKeys.slice(i, i + 1000))
        p.xrevrange(this.store.keys(c).events, '+', '-', 'COUNT', 5);
      for (const [, entries] of (await p.exec()) ?? []) {
        for (const [id, fields] of (entries as Array<[string, string[]]>) ?? []) {
          if (fields[1] === 'turn.committed') last = Math.max(last, Number(id.split('-')[0]));
        }
      }
    }
    return last;
  }

  async close(): Promise<void> {
    await this.turns.close().catch(() => undefined);
    await closeRedis(this.redis);
    const admin = adminRedis();
    await deletePrefix(admin, this.prefix);
    admin.disconnect();
  }
}

export interface WorkerLoadOptions {
  workers: number;
  concurrency: number;
  /** Chats of the measured batch, one message each. */
  chats: number;
  /** Chats run (and waited for) before the measured batch, so neither cold start nor JIT is measured. */
  warmupChats: number;
  mock: RoleProcess;
  label: string;
  timeoutMs: number;
  env?: Record<string, string>;
  /**
   * Write a V8 CPU profile and a sampling heap profile of each worker into this directory
   * (`--cpu-prof`, `--heap-prof`); the workers are then stopped with SIGTERM so Node writes them.
   */
  profileDir?: string;
}

export interface WorkerLoadResult {
  workers: number;
  concurrency: number;
  turns: number;
  modelCalls: number;
  seconds: number;
  turnsPerSec: number;
  /** Worker processes' CPU over the measured batch, summed. */
  workerCpuS: number;
  workerCpuMsPerTurn: number;
  mockCpuS: number | undefined;
  redisCpuS: number;
  /**
   * Commands the Redis server processed over the batch (INFO stats), every client's: exact
   * per turn only on a Redis of the benchmark's own (REDIS_URL), the bench's own polls included.
   */
  redisCommands: number;
  /** The whole machine's CPU busy share over the batch (neighbours included), %. */
  hostBusyPct: number;
  idleRssMb: number[];
  /** Each worker's CPU over 3 s idle (warmed up, queue paused), % of a core. */
  idleCpuPct: number[];
  peakRssMb: number[];
  complete: boolean;
  /** Most model calls of the batch the mock saw open at once (sampled every 200 ms). */
  peakInFlight: number;
}

/**
 * Start `workers` worker processes, warm them up, then release `chats` one-message chats at
 * once (the queue is paused while they are written) and time until the last one committed.
 */
/** Commands the Redis server has processed so far (INFO stats). */
async function redisCommandsProcessed(redis: BenchChats['redis']): Promise<number> {
  return Number(/total_commands_processed:(\d+)/.exec(await redis.info('stats'))?.[1] ?? 0);
}

export async function measureWorkerTurns(opts: WorkerLoadOptions): Promise<WorkerLoadResult> {
  const chats = new BenchChats();
  const procs: RoleProcess[] = [];
  try {
    await chats.ready();
    const env: Record<string, string> = {
      REDIS_URL,
      CHATLANE_PREFIX: chats.prefix,
      LLM_BASE_URL: opts.mock.url!,
      LLM_MODEL: 'mock',
      WORKER_CONCURRENCY: String(opts.concurrency),
      ...opts.env,
    };
    // Not allowed in NODE_OPTIONS: passed to node itself.
    const nodeArgs = opts.profileDir
      ? [
          `--cpu-prof`,
          `--cpu-prof-dir=${opts.profileDir}`,
          `--heap-prof`,
          `--heap-prof-dir=${opts.profileDir}`,
        ]
      : [];
    for (let i = 0; i < opts.workers; i++) {
      // A worker logging below info never says 'worker started': wait for its /readyz instead.
      const quiet = ['warn', 'error', 'fatal', 'silent'].includes(env.LOG_LEVEL ?? 'info');
      const port = quiet ? await freePort() : undefined;
      procs.push(
        await startRole('worker', port ? { ...env, METRICS_PORT: String(port) } : env, {
          timeoutMs: 60_000,
          nodeArgs,
          ...(port && { readyUrl: `http://127.0.0.1:${port}/readyz` }),
        }),
      );
    }

    const warm = Array.from({ length: opts.warmupChats }, (_, i) => `${chats.prefix}-w${i}`);
    await chats.seed(warm, 1);
    const warmDeadline = Date.now() + opts.timeoutMs;
    while ((await chats.pending(warm)) > 0) {
      if (Date.now() > warmDeadline) throw new Error(`${opts.label}: warm-up did not finish`);
      await sleep(200);
    }

    const keys = Array.from({ length: opts.chats }, (_, i) => `${chats.prefix}-c${i}`);
    await chats.turns.pause();
    await chats.seed(keys, 1);
    await sleep(500); // let the workers' fetch loops settle on the paused queue
    const pids = procs.map((p) => p.pid);
    const idleCpu = await idleCpuPct(pids);
    const idle = pids.map((pid) => memoryOf(pid).rssMb);
    const cpu0 = pids.map((pid) => processCpuSeconds(pid) ?? 0);
    const mock0 = processCpuSeconds(opts.mock.pid);
    const redis0 = await redisCpuSeconds(chats.redis);
    const commands0 = await redisCommandsProcessed(chats.redis);
    const host0 = hostCpuTimes();
    const stats0 = await mockStats(opts.mock, `${chats.prefix}-c`);
    const sampler = rssSampler(pids);
    const t0 = Date.now();
    await chats.turns.resume();
    progress(`${opts.label}: ${opts.chats} chats released to ${opts.workers} worker(s)`);

    let complete = true;
    let peakInFlight = 0;
    const deadline = t0 + opts.timeoutMs;
    for (;;) {
      await sleep(200);
      const stats = await mockStats(opts.mock, `${chats.prefix}-c`);
      peakInFlight = Math.max(peakInFlight, stats.inFlight);
      if (stats.requests - stats0.requests >= 2 * opts.chats && (await chats.pending(keys)) === 0) break;
      if (Date.now() > deadline) {
        complete = false;
        progress(`${opts.label}: not finished after ${opts.timeoutMs} ms`);
        break;
      }
    }
    const cpu1 = pids.map((pid) => processCpuSeconds(pid) ?? 0);
    const mock1 = processCpuSeconds(opts.mock.pid);
    const redis1 = await redisCpuSeconds(chats.redis);
    const commands1 = await redisCommandsProcessed(chats.redis);
    const hostBusy = hostBusyPct(host0);
    const peaks = sampler.stop();
    const end = complete ? await chats.lastCommitAt(keys) : Date.now();
    const stats = await mockStats(opts.mock, `${chats.prefix}-c`);
    const seconds = (end - t0) / 1000;
    const workerCpuS = cpu1.reduce((s, v, i) => s + v - cpu0[i]!, 0);
    return {
      workers: opts.workers,
      concurrency: opts.concurrency,
      turns: opts.chats,
      modelCalls: stats.requests - stats0.requests,
      seconds: round(seconds),
      turnsPerSec: round(opts.chats / seconds, 1),
      workerCpuS: round(workerCpuS),
      workerCpuMsPerTurn: round((workerCpuS * 1000) / opts.chats, 3),
      mockCpuS: mock0 !== undefined && mock1 !== undefined ? round(mock1 - mock0) : undefined,
      redisCpuS: round(redis1 - redis0),
      redisCommands: commands1 - commands0,
      hostBusyPct: hostBusy,
      idleRssMb: idle,
      idleCpuPct: idleCpu,
      peakRssMb: peaks,
      complete,
      peakInFlight,
    };
  } finally {
    await Promise.allSettled(procs.map((p) => p.kill(opts.profileDir ? 'SIGTERM' : 'SIGKILL')));
    await chats.close();
  }
}
