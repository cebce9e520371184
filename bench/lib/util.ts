import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { enqueueTurn, type TurnJob } from '../../src/shared/jobs.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { messageTokens } from '../../src/shared/tokens.js';

/** Shared helpers of the benchmarks: stats, key hygiene, child servers, progress. */

export const REDIS_URL = process.env.REDIS_URL?.trim() || 'redis://127.0.0.1:6379';

/** Progress goes to stderr: stdout carries the one JSON document and nothing else. */
export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

export function randomPrefix(label: string): string {
  return `clbench-${randomBytes(4).toString('hex')}-${label}`;
}

export function adminRedis(): Redis {
  return new Redis(REDIS_URL, { maxRetriesPerRequest: null });
}

/**
 * SCAN + DEL every key under `prefix:`. Not UNLINK: freeing a 100k-entry list in Redis's
 * background thread would overlap the next measurement.
 */
export async function deletePrefix(redis: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) deleted += await redis.del(...keys);
  } while (cursor !== '0');
  return deleted;
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Nearest-rank percentile: with 200 samples p99 is the 198th value, an observed one. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function mean(values: number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((s, v) => s + v, 0) / values.length;
}

/** Rounded for the report; raw timings carry float noise that only hides the signal. */
export function round(value: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Median of one numeric field over runs. */
export function medianOf<T>(runs: T[], pick: (run: T) => number): number {
  return median(runs.map(pick));
}

export interface Target {
  metric: string;
  comparator: '>=' | '<=';
  value: number;
}

export function meets(target: Target, value: number): boolean {
  if (!Number.isFinite(value)) return false;
  return target.comparator === '>=' ? value >= target.value : value <= target.value;
}

/** Alternating order across runs so neither side always gets the warmer (or noisier) slot. */
export function orderFor<A extends string, B extends string>(run: number, a: A, b: B): Array<A | B> {
  return run % 2 === 0 ? [a, b] : [b, a];
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A port the OS says is free now; a tiny race with other processes is acceptable for a bench. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface ChildServer {
  url: string;
  pid: number | undefined;
  stop(): Promise<void>;
}

/**
 * Starts a server as its own process so the load generator never shares its event loop,
 * and waits until `readyPath` answers 200.
 */
export async function spawnServer(opts: {
  name: string;
  args: string[];
  env: Record<string, string>;
  readyPath: string;
  timeoutMs?: number;
}): Promise<ChildServer> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, opts.args, {
    env: { ...process.env, ...opts.env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Kept only to explain a failed start; a running server's output is not part of the result.
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited: number | null | undefined;
  const exit = new Promise<void>((resolve) => {
    child.on('exit', (code) => {
      exited = code;
      resolve();
    });
  });

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  for (;;) {
    if (exited !== undefined) throw new Error(`${opts.name} exited with ${exited} before ready:\n${tail}`);
    try {
      const res = await fetch(`${url}${opts.readyPath}`);
      if (res.ok) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${opts.name} not ready after ${opts.timeoutMs ?? 20_000}ms:\n${tail}`);
    }
    await sleep(100);
  }

  return {
    url,
    pid: child.pid,
    async stop() {
      if (exited !== undefined) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exit;
      clearTimeout(timer);
    },
  };
}

/** CPU seconds (user + system) a process has used so far, from /proc; undefined off Linux. */
export function processCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may contain spaces; the fields after its closing paren do not.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat(5), in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/** CPU seconds the Redis server has used so far (INFO cpu). */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const user = Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1] ?? 0);
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1] ?? 0);
  return user + sys;
}

/**
 * CPU used by this process, a child server and Redis over one measurement. As % of one core
 * it says which of them was the bottleneck; as seconds per unit of work it is far steadier
 * than wall-clock throughput on a shared box, where a neighbour can take a core for seconds.
 */
export interface CpuShare {
  wallS: number;
  benchCpuS: number;
  serverCpuS?: number;
  redisCpuS: number;
  benchProcessPct: number;
  serverProcessPct?: number;
  redisPct: number;
}

export async function cpuMeter(redis: Redis, childPid?: number): Promise<() => Promise<CpuShare>> {
  const self0 = process.cpuUsage();
  const child0 = processCpuSeconds(childPid);
  const redis0 = await redisCpuSeconds(redis);
  const t0 = performance.now();
  return async () => {
    const wallS = (performance.now() - t0) / 1000;
    const self = process.cpuUsage(self0);
    const child1 = processCpuSeconds(childPid);
    const redis1 = await redisCpuSeconds(redis);
    const benchCpuS = (self.user + self.system) / 1e6;
    const serverCpuS = child0 !== undefined && child1 !== undefined ? child1 - child0 : undefined;
    const redisCpuS = redis1 - redis0;
    const pct = (cpu: number) => round((cpu / wallS) * 100, 1);
    return {
      wallS: round(wallS),
      benchCpuS: round(benchCpuS),
      ...(serverCpuS !== undefined && { serverCpuS: round(serverCpuS), serverProcessPct: pct(serverCpuS) }),
      redisCpuS: round(redisCpuS),
      benchProcessPct: pct(benchCpuS),
      redisPct: pct(redisCpuS),
    };
  };
}

/** A small deterministic PRNG: the same filler texts in every mode and run. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** A message with its token count, as a commit stores it (bench texts are short: counted at once). */
export function counted(message: ChatMessage): ChatMessage {
  return { ...message, metadata: { ...message.metadata, tokens: messageTokens(message) } };
}

/** A user message as the ingress writes it from the API (one text part). */
export function userMessage(chatKey: string, id: string, text: string): ChatMessage {
  return {
    id,
    role: 'user',
    parts: [{ type: 'text', text }],
    metadata: { ts: Date.now(), chatKey, kind: 'normal', channel: 'api', messageId: id, userId: 'u1' },
  };
}

/** Runs `fn` over `items` with at most `width` in flight: seeding is not measured, only bounded. */
export async function inBatches<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += width) await Promise.all(items.slice(i, i + width).map(fn));
}

/**
 * Writes `messagesPerChat` user messages into each chat as the ingress does it: `ingest`, then
 * ask for a turn (deduplicated per chat); at most `width` chats at once (not measured).
 */
export async function seedChats(
  store: ChatStore,
  turns: Queue<TurnJob>,
  chatKeys: string[],
  messagesPerChat: number,
  width = 200,
  text?: string,
): Promise<void> {
  const limits = { maxPending: 1000, dedupWindowMs: 60_000 };
  await inBatches(chatKeys, width, async (chatKey) => {
    for (let m = 0; m < messagesPerChat; m++) {
      await store.ingest(
        chatKey,
        userMessage(chatKey, `m${m}`, text ?? `message ${m} of ${chatKey}`),
        limits,
      );
      await enqueueTurn(turns, chatKey);
    }
  });
}

const WORDS = 'the quick brown fox jumps over the lazy dog while the cat watches it all from the fence ';

/** The stream benchmark's user message of `chars` characters (the mock's reply echoes it). */
export function messageText(chars: number): string {
  return WORDS.repeat(Math.ceil(chars / WORDS.length))
    .slice(0, chars)
    .trim();
}

/** Appends `value` to `record[key]`, creating the list on first use. */
export function pushTo<T>(record: Record<string, T[]>, key: string | number, value: T): void {
  const list = record[key];
  if (list) list.push(value);
  else record[key] = [value];
}
