import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { loadConfig } from '../src/shared/config.js';
import { createQueue, QUEUES, type TurnJob } from '../src/shared/jobs.js';
import { queuePrefix } from '../src/shared/keys.js';
import { bullmqLockRenewTime } from '../src/shared/liveness.js';
import { silentLogger } from '../src/shared/logger.js';
import { closeRedis, createRedis, waitReady } from '../src/shared/redis.js';
import { ChatStore } from '../src/shared/store/chat-store.js';
import type { TurnOutcome } from '../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../src/worker/turn/turn-deps.js';
import { createTurnWorker } from '../src/worker/turn/turn-worker.js';
import { echoModel } from './lib/echo-model.js';
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
  seedChats,
  type Target,
} from './lib/util.js';

/**
 * Turn throughput of the real worker (createTurnWorker + production TurnDeps wiring, with an
 * in-process zero-latency model) against a bare BullMQ worker with a no-op processor.
 */

export interface TurnsOptions {
  runs: number;
  chats: number;
  messagesPerChat: number;
  anchorJobs: number;
  concurrency: number;
  timeoutMs: number;
}

export const TURNS_DEFAULTS: TurnsOptions = {
  runs: 3,
  chats: 1000,
  messagesPerChat: 5,
  anchorJobs: 5000,
  concurrency: 32,
  timeoutMs: 300_000,
};

export const TURNS_TARGET: Target = {
  metric: 'ratio = chatlane messages/s ÷ anchor jobs/s',
  comparator: '>=',
  value: 0.3,
};

export interface AnchorMeasurement {
  jobs: number;
  seconds: number;
  jobsPerSec: number;
  /** CPU while processing: this process (the worker) and Redis. */
  cpu: CpuShare;
  workerCpuUsPerJob: number;
  redisCpuUsPerJob: number;
}

export interface ChatlaneMeasurement {
  chats: number;
  messages: number;
  /** Every turn job that ran, whatever its outcome. */
  turns: number;
  outcomes: Record<string, number>;
  failedAttempts: number;
  modelCalls: number;
  avgMessagesPerTurn: number;
  seconds: number;
  turnsPerSec: number;
  messagesPerSec: number;
  complete: boolean;
  inboxesEmpty: number;
  chatsEndingWithAssistant: number;
  cpu: CpuShare;
  workerCpuUsPerMessage: number;
  redisCpuUsPerMessage: number;
}

export interface TurnsRun {
  /** Measured before and after chatlane: the anchor is short (~1 s), so one noisy second would skew it. */
  anchors: [AnchorMeasurement, AnchorMeasurement];
  anchorJobsPerSec: number;
  chatlane: ChatlaneMeasurement;
  ratio: number;
  /** Anchor worker CPU per job ÷ chatlane worker CPU per message: same sense as `ratio`. */
  cpuRatio: number;
}

/** A stopwatch end: `finish()` records the time, `done` rejects if it never comes. */
function completion(timeoutMs: number, what: string) {
  let resolve!: (at: number) => void;
  let reject!: (err: Error) => void;
  const done = new Promise<number>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const timer = setTimeout(
    () => reject(new Error(`${what} did not finish within ${timeoutMs}ms`)),
    timeoutMs,
  );
  return {
    done: done.finally(() => clearTimeout(timer)),
    finish: () => resolve(performance.now()),
  };
}

export async function measureChatlane(opts: TurnsOptions, run: number): Promise<ChatlaneMeasurement> {
  const prefix = randomPrefix('turns');
  const config = loadConfig({
    REDIS_URL,
    CHATLANE_PREFIX: prefix,
    // Satisfies requireModel only; the model is replaced by the in-process mock below.
    LLM_BASE_URL: 'http://127.0.0.1:9/v1',
    LLM_MODEL: 'bench-echo',
    WORKER_CONCURRENCY: String(opts.concurrency),
  });
  const admin = adminRedis();
  const seeder = createRedis(REDIS_URL, 'ingress', 'chatlane:bench-seed');
  const connection = createRedis(REDIS_URL, 'worker', 'chatlane:bench-worker');
  const chatKeys = Array.from({ length: opts.chats }, (_, i) => `bench-chat-${i}`);
  const total = opts.chats * opts.messagesPerChat;
  try {
    await waitReady(seeder, 10_000);
    const seedStore = new ChatStore(seeder, { prefix, maxEvents: config.EVENTS_MAX_LEN });
    const seedQueue = createQueue<TurnJob>(prefix, QUEUES.turns, seeder);
    await seedChats(seedStore, seedQueue, chatKeys, opts.messagesPerChat);
    await seedQueue.close();
    progress(`turns run ${run + 1}: chatlane seeded ${total} messages in ${opts.chats} chats`);

    const store = new ChatStore(connection, { prefix, maxEvents: config.EVENTS_MAX_LEN });
    const turns = createQueue<TurnJob>(prefix, QUEUES.turns, connection);
    const { model, calls } = echoModel();
    const deps = { ...turnDepsFromConfig(config, store, silentLogger()), model };
    const outcomes: Record<string, number> = {};
    let consumed = 0;
    let ran = 0;
    let failedAttempts = 0;
    const end = completion(opts.timeoutMs, 'chatlane turns');
    const worker = createTurnWorker(deps, {
      prefix,
      connection,
      concurrency: opts.concurrency,
      lockDurationMs: config.JOB_LOCK_MS,
      stalledIntervalMs: config.STALLED_INTERVAL_MS,
      turns,
      onOutcome: (outcome: TurnOutcome) => {
        ran++;
        outcomes[outcome.status] = (outcomes[outcome.status] ?? 0) + 1;
        if (outcome.status === 'done') consumed += outcome.consumed;
        if (consumed >= total) end.finish();
      },
    });
    worker.on('failed', () => failedAttempts++);
    await worker.waitUntilReady();

    const stopMeter = await cpuMeter(admin);
    const started = performance.now();
    worker.run().catch((err: unknown) => progress(`turn worker stopped: ${String(err)}`));
    let finished: number;
    let complete = true;
    try {
      finished = await end.done;
    } catch (err) {
      progress(String(err));
      finished = performance.now();
      complete = false;
    }
    const cpu = await stopMeter();
    await worker.close();
    await turns.close();

    // Checked after the clock stopped: every inbox empty, every chat answered last.
    const check = seeder.pipeline();
    for (const chatKey of chatKeys) {
      const k = store.keys(chatKey);
      check.xlen(k.inbox);
      check.lindex(k.hist, -1);
    }
    const replies = (await check.exec()) ?? [];
    let inboxesEmpty = 0;
    let chatsEndingWithAssistant = 0;
    for (let i = 0; i < chatKeys.length; i++) {
      if (Number(replies[2 * i]?.[1]) === 0) inboxesEmpty++;
      const last = replies[2 * i + 1]?.[1];
      if (typeof last === 'string' && (JSON.parse(last) as { role?: string }).role === 'assistant') {
        chatsEndingWithAssistant++;
      }
    }

    const seconds = (finished - started) / 1000;
    const result: ChatlaneMeasurement = {
      chats: opts.chats,
      messages: total,
      turns: ran,
      outcomes,
      failedAttempts,
      modelCalls: calls(),
      avgMessagesPerTurn: round(consumed / Math.max(1, outcomes.done ?? 0), 2),
      seconds: round(seconds),
      turnsPerSec: round(ran / seconds, 1),
      messagesPerSec: round(consumed / seconds, 1),
      complete: complete && inboxesEmpty === opts.chats && chatsEndingWithAssistant === opts.chats,
      inboxesEmpty,
      chatsEndingWithAssistant,
      cpu,
      workerCpuUsPerMessage: round((cpu.benchCpuS * 1e6) / Math.max(1, consumed), 1),
      redisCpuUsPerMessage: round((cpu.redisCpuS * 1e6) / Math.max(1, consumed), 1),
    };
    progress(
      `turns run ${run + 1}: chatlane ${result.turns} turns, ${result.messagesPerSec} msg/s, ` +
        `${result.turnsPerSec} turns/s in ${result.seconds}s`,
    );
    return result;
  } finally {
    await closeRedis(connection);
    await closeRedis(seeder);
    await deletePrefix(admin, prefix);
    admin.disconnect();
  }
}

export async function measureAnchor(opts: TurnsOptions, run: number): Promise<AnchorMeasurement> {
  const prefix = randomPrefix('anchor');
  const admin = adminRedis();
  // Bare BullMQ as its docs set it up (no auto-pipelining): the anchor must not inherit our tuning.
  const connection: Redis = new Redis(REDIS_URL, {
    maxRetriesPerRequest: null,
    connectionName: 'chatlane:bench-anchor',
  });
  const config = loadConfig({});
  const options = {
    connection,
    prefix: queuePrefix(prefix, 'anchor'),
    // The same retention as the turns queue, so completing a job costs the same bookkeeping.
    defaultJobOptions: { removeOnComplete: { count: 1000 }, removeOnFail: { count: 5000 } },
  };
  try {
    const queue = new Queue<TurnJob>('anchor', options);
    const jobs = Array.from({ length: opts.anchorJobs }, (_, i) => ({
      name: 'turn',
      data: { chatKey: `bench-chat-${i}` },
      opts: { attempts: 5, backoff: { type: 'exponential', delay: 1000 } },
    }));
    for (let i = 0; i < jobs.length; i += 500) await queue.addBulk(jobs.slice(i, i + 500));
    progress(`turns run ${run + 1}: anchor seeded ${opts.anchorJobs} jobs`);

    let completed = 0;
    const end = completion(opts.timeoutMs, 'anchor jobs');
    const worker = new Worker<TurnJob>('anchor', async () => undefined, {
      connection,
      prefix: options.prefix,
      concurrency: opts.concurrency,
      lockDuration: config.JOB_LOCK_MS,
      lockRenewTime: bullmqLockRenewTime(config.JOB_LOCK_MS),
      stalledInterval: config.STALLED_INTERVAL_MS,
      maxStalledCount: 3,
      autorun: false,
    });
    worker.on('completed', () => {
      if (++completed >= opts.anchorJobs) end.finish();
    });
    await worker.waitUntilReady();
    const stopMeter = await cpuMeter(admin);
    const started = performance.now();
    worker.run().catch((err: unknown) => progress(`anchor worker stopped: ${String(err)}`));
    const finished = await end.done;
    const cpu = await stopMeter();
    await worker.close();
    await queue.close();
    const seconds = (finished - started) / 1000;
    const result = {
      jobs: completed,
      seconds: round(seconds),
      jobsPerSec: round(completed / seconds, 1),
      cpu,
      workerCpuUsPerJob: round((cpu.benchCpuS * 1e6) / completed, 1),
      redisCpuUsPerJob: round((cpu.redisCpuS * 1e6) / completed, 1),
    };
    progress(`turns run ${run + 1}: anchor ${result.jobsPerSec} jobs/s in ${result.seconds}s`);
    return result;
  } finally {
    await closeRedis(connection);
    await deletePrefix(admin, prefix);
    admin.disconnect();
  }
}

/** Mean of the two bracketing anchor measurements of a run. */
function bothAnchors(run: TurnsRun, pick: (a: AnchorMeasurement) => number): number {
  return round((pick(run.anchors[0]) + pick(run.anchors[1])) / 2, 1);
}

export async function benchTurns(opts: TurnsOptions) {
  const runs: TurnsRun[] = [];
  for (let run = 0; run < opts.runs; run++) {
    const before = await measureAnchor(opts, run);
    const chatlane = await measureChatlane(opts, run);
    const after = await measureAnchor(opts, run);
    const anchorJobsPerSec = round((before.jobsPerSec + after.jobsPerSec) / 2, 1);
    const anchorCpuPerJob = (before.workerCpuUsPerJob + after.workerCpuUsPerJob) / 2;
    runs.push({
      anchors: [before, after],
      anchorJobsPerSec,
      chatlane,
      ratio: round(chatlane.messagesPerSec / anchorJobsPerSec),
      cpuRatio: round(anchorCpuPerJob / chatlane.workerCpuUsPerMessage),
    });
  }
  const ratio = medianOf(runs, (r) => r.ratio);
  const turns = medianOf(runs, (r) => r.chatlane.turns);
  return {
    description:
      `${opts.chats} chats × ${opts.messagesPerChat} messages ingested (ChatStore.ingest + enqueueTurn) before the ` +
      `worker starts, processed by createTurnWorker (concurrency ${opts.concurrency}) with a zero-latency ` +
      `ai/test model (chat_send, then stop: 2 model calls per turn); anchor = bare BullMQ Worker, no-op ` +
      `processor, ${opts.anchorJobs} jobs, measured before and after chatlane in each run (mean of the two)`,
    settings: opts,
    runs,
    median: {
      anchorJobsPerSec: medianOf(runs, (r) => r.anchorJobsPerSec),
      chatlaneMessagesPerSec: medianOf(runs, (r) => r.chatlane.messagesPerSec),
      chatlaneTurnsPerSec: medianOf(runs, (r) => r.chatlane.turnsPerSec),
      turns,
      chatlaneWorkerCpuPct: medianOf(runs, (r) => r.chatlane.cpu.benchProcessPct),
      chatlaneRedisCpuPct: medianOf(runs, (r) => r.chatlane.cpu.redisPct),
      anchorWorkerCpuPct: medianOf(runs, (r) => bothAnchors(r, (a) => a.cpu.benchProcessPct)),
      anchorRedisCpuPct: medianOf(runs, (r) => bothAnchors(r, (a) => a.cpu.redisPct)),
      chatlaneWorkerCpuUsPerMessage: medianOf(runs, (r) => r.chatlane.workerCpuUsPerMessage),
      chatlaneRedisCpuUsPerMessage: medianOf(runs, (r) => r.chatlane.redisCpuUsPerMessage),
      anchorWorkerCpuUsPerJob: medianOf(runs, (r) => bothAnchors(r, (a) => a.workerCpuUsPerJob)),
      anchorRedisCpuUsPerJob: medianOf(runs, (r) => bothAnchors(r, (a) => a.redisCpuUsPerJob)),
      cpuRatio: medianOf(runs, (r) => r.cpuRatio),
      ratio,
    },
    note:
      `${opts.chats * opts.messagesPerChat} messages ran as ${turns} turns (median): a turn takes every ` +
      `pending message of its chat (up to MAX_MESSAGES_PER_TURN), and all ${opts.messagesPerChat} were ` +
      'pending before the worker started, so messages/s is turns/s times the batch size.',
    target: TURNS_TARGET,
    meetsTarget: meets(TURNS_TARGET, ratio) && runs.every((r) => r.chatlane.complete),
  };
}
