// `node bench/probes/queue-cost.mjs`: what BullMQ's job lifecycle costs the process that works the
// jobs, as JSON, against the same pacing without a queue. A producer (this process) adds a job
// every 1000/RATE ms, each a new chat; a worker process (this file with `worker`) takes them
// with the turn worker's BullMQ options at their defaults (src/worker/turn/turn-worker.ts: a 10 s
// lock renewed every 2 s, a 1 s stall check, BullMQ's metrics; the turns queue's
// removeOnComplete and deduplication by chat key, src/shared/jobs.ts) and concurrency 200,
// room for every job held at once, and holds each for HOLD_MS, as a turn holds its job through
// the model's calls. The anchor process (`bare`) starts as many timers of HOLD_MS at the same
// pace and nothing else. Each child reports its own user + system CPU from its WARMUP-th job to
// its (WARMUP + MEASURED)-th; the difference per job is the queue's: fetch (the blocking pop and
// moveToActive), lock renewal, stall checks, completion.
//
// Redis at REDIS_URL (default redis://127.0.0.1:6379), under a prefix of its own
// (QUEUE_COST_PREFIX), deleted at the end. QUEUE_COST_RATE, _HOLD_MS, _WARMUP, _JOBS and _RUNS
// change the sizes (defaults 50 a second, 2,000 ms, 200, 1,000, 3).
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { MetricsTime, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { median } from './probe-stats.mjs';

const env = process.env;
// Smaller sizes only prove the script works (test/e2e/bench-probes.test.ts); never a figure.
const RATE = Number(env.QUEUE_COST_RATE ?? 50);
const HOLD_MS = Number(env.QUEUE_COST_HOLD_MS ?? 2000);
const WARMUP = Number(env.QUEUE_COST_WARMUP ?? 200);
const MEASURED = Number(env.QUEUE_COST_JOBS ?? 1000);
const RUNS = Number(env.QUEUE_COST_RUNS ?? 3);
/** Each run's keys go under `<this>-<run>:`. */
const PREFIX = env.QUEUE_COST_PREFIX ?? `queue-cost-${randomUUID().slice(0, 8)}`;
const redisUrl = env.REDIS_URL ?? 'redis://127.0.0.1:6379';

const role = process.argv[2];
const connection = () => new Redis(redisUrl, { maxRetriesPerRequest: null });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Counts finished jobs; prints the CPU spent between the warm-up and the end, then exits. */
function meter(label) {
  let done = 0;
  let cpu0;
  return () => {
    done++;
    if (done === WARMUP) cpu0 = process.cpuUsage();
    if (done === WARMUP + MEASURED) {
      const cpu = process.cpuUsage(cpu0);
      process.stdout.write(`${JSON.stringify({ [label]: (cpu.user + cpu.system) / MEASURED })}\n`);
      process.exit(0);
    }
  };
}

if (role === 'worker') {
  const [prefix, name] = [process.argv[3], process.argv[4]];
  const finished = meter('queueUsPerJob');
  const worker = new Worker(name, () => sleep(HOLD_MS).then(() => ({ status: 'done' })), {
    connection: connection(),
    prefix,
    concurrency: 200,
    lockDuration: 10_000,
    lockRenewTime: 2000,
    stalledInterval: 1000,
    maxStalledCount: 3,
    metrics: { maxDataPoints: MetricsTime.ONE_WEEK },
  });
  worker.on('completed', finished);
  process.stdout.write('ready\n');
} else if (role === 'bare') {
  const finished = meter('bareUsPerJob');
  for (let i = 0; i < WARMUP + MEASURED; i++) {
    void sleep(HOLD_MS).then(finished);
    await sleep(1000 / RATE);
  }
} else {
  const self = fileURLToPath(import.meta.url);
  /** A child of this file: resolves with its JSON line once it exits. */
  const child = (args, onReady) =>
    new Promise((resolve, reject) => {
      const p = spawn(process.execPath, [self, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      p.stdout.on('data', (d) => {
        out += d;
        if (out.includes('ready\n') && onReady) {
          out = out.replace('ready\n', '');
          onReady();
          onReady = undefined;
        }
      });
      p.on('exit', (code) => {
        try {
          if (code !== 0) throw new Error(`exited ${code}`);
          resolve(JSON.parse(out));
        } catch (err) {
          reject(new Error(`queue-cost ${args[0]}: ${err.message}; its output: ${out.trim() || '(none)'}`));
        }
      });
    });
  const admin = connection();
  const runs = [];
  for (let run = 0; run < RUNS; run++) {
    const prefix = `${PREFIX}-${run}`;
    const producer = connection();
    const queue = new Queue('turns', {
      connection: producer,
      prefix,
      defaultJobOptions: { removeOnComplete: { count: 1000 }, removeOnFail: { count: 5000 } },
    });
    let produce;
    const started = new Promise((resolve) => {
      produce = resolve;
    });
    const worker = child(['worker', prefix, 'turns'], () => produce());
    await started;
    for (let i = 0; i < WARMUP + MEASURED + 50; i++) {
      const chatKey = `chat-${i}`;
      await queue.add('turn', { chatKey }, { deduplication: { id: chatKey, keepLastIfActive: true } });
      await sleep(1000 / RATE);
    }
    const { queueUsPerJob } = await worker;
    await queue.close();
    // BullMQ leaves a connection it was given open.
    await producer.quit();
    const { bareUsPerJob } = await child(['bare']);
    runs.push({ queueUsPerJob: Math.round(queueUsPerJob), bareUsPerJob: Math.round(bareUsPerJob) });
    let cursor = '0';
    do {
      const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await admin.del(...keys);
    } while (cursor !== '0');
  }
  await admin.quit();
  const queueUs = median(runs.map((r) => r.queueUsPerJob));
  const bareUs = median(runs.map((r) => r.bareUsPerJob));
  process.stdout.write(
    `${JSON.stringify({ rate: RATE, holdMs: HOLD_MS, measured: MEASURED, runs, median: { queueUsPerJob: queueUs, bareUsPerJob: bareUs, queueOverBareUs: queueUs - bareUs } }, null, 2)}\n`,
  );
}
