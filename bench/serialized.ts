import { Queue as GroupQueue, Worker as GroupWorker } from 'groupmq';
import { Redis } from 'ioredis';
import {
  adminRedis,
  type CpuShare,
  cpuMeter,
  deletePrefix,
  median,
  progress,
  REDIS_URL,
  randomPrefix,
  round,
} from './lib/util.js';
import {
  type AnchorMeasurement,
  type ChatlaneMeasurement,
  measureAnchor,
  measureChatlane,
  TURNS_DEFAULTS,
  type TurnsOptions,
} from './turns.js';

/**
 * Per-chat serialized throughput, side by side in one run: 1,000 chats with a burst of 5
 * messages each, processed one chat at a time per chat by
 * - chatlane: the real turn worker with a zero-latency in-process model (a turn takes every
 *   pending message of its chat, so a burst of 5 is one turn);
 * - groupmq: a per-group FIFO queue on Redis, one job per message, a no-op handler (one job
 *   per group at a time, in order);
 * - bare BullMQ: no-op jobs with no per-chat serialization at all — the ceiling.
 * Same Redis, same worker concurrency (32), same process for the workers.
 */

/** The turns benchmark's sizes (1,000 chats × 5, 5,000 anchor jobs, concurrency 32). */
export type SerializedOptions = TurnsOptions;
export const SERIALIZED_DEFAULTS: SerializedOptions = TURNS_DEFAULTS;

interface GroupmqMeasurement {
  jobs: number;
  seconds: number;
  jobsPerSec: number;
  /** Every group's jobs ran in the order they were added. */
  inOrder: boolean;
  cpu: CpuShare;
  workerCpuUsPerJob: number;
}

async function measureGroupmq(opts: SerializedOptions, run: number): Promise<GroupmqMeasurement> {
  const namespace = randomPrefix('groupmq');
  const redis = new Redis(REDIS_URL, {
    maxRetriesPerRequest: null,
    connectionName: 'chatlane:bench-groupmq',
  });
  const admin = adminRedis();
  const total = opts.chats * opts.messagesPerChat;
  try {
    const queue = new GroupQueue<{ m: number }>({ redis, namespace, jobTimeoutMs: 30_000, keepCompleted: 0 });
    for (let i = 0; i < opts.chats; i += 200) {
      await Promise.all(
        Array.from({ length: Math.min(200, opts.chats - i) }, async (_, k) => {
          for (let m = 0; m < opts.messagesPerChat; m++) {
            await queue.add({ groupId: `bench-chat-${i + k}`, data: { m }, orderMs: Date.now() });
          }
        }),
      );
    }
    progress(`serialized run ${run + 1}: groupmq seeded ${total} jobs in ${opts.chats} groups`);

    let done = 0;
    let inOrder = true;
    const last = new Map<string, number>();
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const worker = new GroupWorker<{ m: number }>({
      queue,
      concurrency: opts.concurrency,
      handler: async (job) => {
        const prev = last.get(job.groupId) ?? -1;
        if (job.data.m !== prev + 1) inOrder = false;
        last.set(job.groupId, job.data.m);
        if (++done >= total) finish();
      },
    });
    const stopMeter = await cpuMeter(admin);
    const started = performance.now();
    void worker.run();
    const timer = setTimeout(finish, opts.timeoutMs);
    await finished;
    clearTimeout(timer);
    const seconds = (performance.now() - started) / 1000;
    const cpu = await stopMeter();
    await worker.close();
    await queue.close();
    const result = {
      jobs: done,
      seconds: round(seconds),
      jobsPerSec: round(done / seconds, 1),
      inOrder: inOrder && done === total,
      cpu,
      workerCpuUsPerJob: round((cpu.benchCpuS * 1e6) / Math.max(1, done), 1),
    };
    progress(`serialized run ${run + 1}: groupmq ${result.jobsPerSec} jobs/s in ${result.seconds}s`);
    return result;
  } finally {
    redis.disconnect();
    await deletePrefix(admin, `groupmq:${namespace}`);
    admin.disconnect();
  }
}

interface SerializedRun {
  anchor: AnchorMeasurement;
  groupmq: GroupmqMeasurement;
  chatlane: ChatlaneMeasurement;
  chatlaneVsGroupmq: number;
  chatlaneVsBullmq: number;
  groupmqVsBullmq: number;
}

export async function benchSerialized(opts: SerializedOptions) {
  const runs: SerializedRun[] = [];
  for (let run = 0; run < opts.runs; run++) {
    const anchor = await measureAnchor(opts, run);
    const groupmq = await measureGroupmq(opts, run);
    const chatlane = await measureChatlane(opts, run);
    runs.push({
      anchor,
      groupmq,
      chatlane,
      chatlaneVsGroupmq: round(chatlane.messagesPerSec / groupmq.jobsPerSec),
      chatlaneVsBullmq: round(chatlane.messagesPerSec / anchor.jobsPerSec),
      groupmqVsBullmq: round(groupmq.jobsPerSec / anchor.jobsPerSec),
    });
  }
  return {
    description:
      `${opts.chats} chats × a burst of ${opts.messagesPerChat} messages, all written before the workers start; ` +
      `worker concurrency ${opts.concurrency} in the bench process for all three. chatlane: createTurnWorker with ` +
      'the production wiring and a zero-latency ai/test model (2 calls per turn); groupmq: one job per message ' +
      `in ${opts.chats} groups, no-op handler; bare BullMQ: ${opts.anchorJobs} no-op jobs (no per-chat order)`,
    settings: opts,
    runs,
    median: {
      bullmqJobsPerSec: median(runs.map((r) => r.anchor.jobsPerSec)),
      groupmqMessagesPerSec: median(runs.map((r) => r.groupmq.jobsPerSec)),
      chatlaneMessagesPerSec: median(runs.map((r) => r.chatlane.messagesPerSec)),
      chatlaneTurnsPerSec: median(runs.map((r) => r.chatlane.turnsPerSec)),
      chatlaneVsGroupmq: median(runs.map((r) => r.chatlaneVsGroupmq)),
      chatlaneVsBullmq: median(runs.map((r) => r.chatlaneVsBullmq)),
      groupmqVsBullmq: median(runs.map((r) => r.groupmqVsBullmq)),
      groupmqInOrder: runs.every((r) => r.groupmq.inOrder),
      chatlaneComplete: runs.every((r) => r.chatlane.complete),
    },
  };
}
