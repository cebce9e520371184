import type { ConnectionOptions, Queue } from 'bullmq';
import { MetricsTime, UnrecoverableError, Worker } from '../../shared/bullmq.js';
import {
  createQueue,
  type DeliveryJob,
  enqueueDelivery,
  enqueueTurn,
  LIVE_JOB_STATES,
  QUEUES,
  queueOptions,
  type TurnJob,
  turnJobSchema,
} from '../../shared/jobs.js';
import { chatsIndexKey } from '../../shared/keys.js';
import type { Logger } from '../../shared/logger.js';
import type { ChatStore } from '../../shared/store/chat-store.js';
import type { ContactBook } from '../../shared/store/contacts.js';
import { expireIdleChats } from './retention.js';

/**
 * The sweeper (DESIGN §5): the safety net under "no acknowledged message is lost". A chat
 * can be left with pending messages and no job when the ingress died between ingest and
 * enqueue, a turn failed for good (attempts exhausted), or a job vanished (removed by hand,
 * Redis failover). Every SWEEP_INTERVAL_MS one worker of the fleet checks a bounded batch
 * of chats and re-enqueues those with pending messages, no live lease and no live job.
 *
 * It runs as a BullMQ Job Scheduler on its own `maintenance` queue, not on `turns`:
 * - a sweep must not wait behind a turn backlog, which is exactly when it matters most;
 * - it must not count against TURNS_GLOBAL_CONCURRENCY, the cap on model calls;
 * - `turns` jobs are `{ chatKey }` only (DESIGN §5), so the turn processor stays as it is.
 * Every worker upserts the same scheduler (idempotent): BullMQ keeps one job per interval
 * for the whole fleet, and whichever worker is free runs it.
 *
 * Re-enqueueing is always safe: `enqueueTurn` deduplicates by chatKey, so an add that races
 * with the ingress or a finishing turn is dropped (job waiting) or becomes the one kept
 * follow-up (job active), and a turn that finds nothing pending ends `idle`.
 */

export const SWEEPER_SCHEDULER_ID = 'sweeper';
export const SWEEP_JOB_NAME = 'sweep';
/** Whole-chat expiry (CHAT_TTL_DAYS, src/worker/upkeep/retention.ts) runs on the same queue. */
export const EXPIRY_SCHEDULER_ID = 'chat-expiry';
export const EXPIRY_JOB_NAME = 'expire';

/** Chats checked at once within one sweep. */
const CHECK_CONCURRENCY = 32;
/** Re-enqueued chat keys a sweep reports (the count is always exact). */
const REPORT_KEYS = 100;

/** Where the walk over the chat index resumes (a rank, newest first). */
export function sweepCursorKey(prefix: string): string {
  return `${chatsIndexKey(prefix)}:sweep-cursor`;
}

export interface SweepDeps {
  store: ChatStore;
  turns: Queue<TurnJob>;
  /**
   * When given, a chat with outbox items its delivery has not reached and no live delivery
   * job gets one (the trigger after an outbox write is lost when its process dies in between).
   */
  deliveries?: Queue<DeliveryJob>;
  /** When given, contact sends a crash left half done are finished (written to their target). */
  contacts?: ContactBook;
  /** Chats checked per sweep (SWEEP_BATCH), plus up to a tenth of it from failed jobs. */
  batch: number;
  logger: Logger;
}

export type SweepVerdict = 'idle' | 'leased' | 'queued' | 'requeued';

export interface SweepReport {
  /** Chats in the index. */
  indexed: number;
  checked: number;
  /** Nothing pending. */
  idle: number;
  /** Pending, but a live lease: a turn is running. */
  leased: number;
  /** Pending, and a job that will run (waiting, active, delayed, ...). */
  queued: number;
  requeuedCount: number;
  /** The first REPORT_KEYS re-enqueued chats. */
  requeued: string[];
  /** Rank the next sweep's page starts at. */
  cursor: number;
}

/**
 * One chat: pending messages and the lease in one script (Redis's clock), then the chat's
 * BullMQ job through its deduplication key. Re-enqueues when messages wait and nothing
 * will take them: no live lease and no job in a live state.
 */
export async function sweepChat(
  deps: Pick<SweepDeps, 'store' | 'turns' | 'deliveries' | 'contacts' | 'logger'>,
  chatKey: string,
): Promise<SweepVerdict> {
  const state = await deps.store.sweepCheck(chatKey);
  if (state.relays > 0 && deps.contacts) {
    for (const { to, routed } of await deps.contacts.relayPending(chatKey)) {
      deps.logger?.warn({ chatKey, to }, 'sweeper finished a contact send a crash left half done');
      if (routed && deps.deliveries) await enqueueDelivery(deps.deliveries, to);
    }
  }
  if (state.undelivered && deps.deliveries) await sweepDelivery(deps, deps.deliveries, chatKey);
  if (state.pending === 0) return 'idle';
  if (state.lease === 'live') return 'leased';
  const jobId = await deps.turns.getDeduplicationJobId(chatKey);
  const jobState = jobId ? await deps.turns.getJobState(jobId) : undefined;
  if (jobState && LIVE_JOB_STATES.has(jobState)) return 'queued';
  await enqueueTurn(deps.turns, chatKey);
  await deps.store.appendEvent(chatKey, 'sweep.requeued', {
    pending: state.pending,
    lease: state.lease,
    leaseMs: state.leaseMs,
    staleJobId: jobId ?? null,
    staleJobState: jobState ?? null,
  });
  return 'requeued';
}

/** Re-add the chat's delivery job unless one will run. */
async function sweepDelivery(
  deps: Pick<SweepDeps, 'store' | 'logger'>,
  deliveries: Queue<DeliveryJob>,
  chatKey: string,
): Promise<void> {
  const jobId = await deliveries.getDeduplicationJobId(chatKey);
  const jobState = jobId ? await deliveries.getJobState(jobId) : undefined;
  if (jobState && LIVE_JOB_STATES.has(jobState)) return;
  await enqueueDelivery(deliveries, chatKey);
  await deps.store.appendEvent(chatKey, 'sweep.delivery-requeued', {
    staleJobId: jobId ?? null,
    staleJobState: jobState ?? null,
  });
  deps.logger?.warn({ chatKey }, 'sweeper re-enqueued the delivery of a chat with undelivered replies');
}

/** Chats whose turn jobs failed for good most recently (they keep their pending messages). */
async function recentlyFailed(turns: Queue<TurnJob>, count: number): Promise<string[]> {
  const jobs = await turns.getJobs(['failed'], 0, count - 1, false);
  const out: string[] = [];
  for (const job of jobs) {
    const parsed = turnJobSchema.safeParse(job?.data);
    if (parsed.success) out.push(parsed.data.chatKey);
  }
  return out;
}

/**
 * Which chats to check: all of them when the index fits in one batch; else the newest half
 * of a batch (recent activity is where a lost job usually is) plus a page of the rest
 * from a cursor persisted in Redis, so every indexed chat is checked within
 * ceil((indexed - batch/2) / (batch/2)) sweeps. Chats with a job that failed for good are
 * added on top. Ranks move as chats are touched; a chat can be checked twice in one walk,
 * but a chat that stays put is never skipped by touches. Chat expiry (CHAT_TTL_DAYS) also
 * removes idle chats from the index: that shifts older ranks up, so a chat can wait one more
 * walk (expired chats have nothing pending, and every chat is reached in a later walk).
 */
async function pickChats(deps: SweepDeps): Promise<{ chats: string[]; indexed: number; cursor: number }> {
  const { redis, prefix } = deps.store;
  const index = chatsIndexKey(prefix);
  const batch = Math.max(1, deps.batch);
  const [indexed, failed] = await Promise.all([
    redis.zcard(index),
    recentlyFailed(deps.turns, Math.max(1, Math.floor(batch / 10))),
  ]);
  if (indexed <= batch) {
    const all = indexed > 0 ? await redis.zrevrange(index, 0, batch - 1) : [];
    return { chats: [...new Set([...failed, ...all])], indexed, cursor: 0 };
  }
  const head = Math.floor(batch / 2);
  const tail = batch - head;
  const stored = Number(await redis.get(sweepCursorKey(prefix)));
  const from = Number.isInteger(stored) && stored >= head && stored < indexed ? stored : head;
  const [recent, page] = await Promise.all([
    head > 0 ? redis.zrevrange(index, 0, head - 1) : Promise.resolve([] as string[]),
    redis.zrevrange(index, from, from + tail - 1),
  ]);
  const cursor = from + page.length >= indexed ? head : from + page.length;
  await redis.set(sweepCursorKey(prefix), String(cursor));
  return { chats: [...new Set([...failed, ...recent, ...page])], indexed, cursor };
}

/** One sweep: bounded by `batch` (+ a tenth for failed jobs), CHECK_CONCURRENCY at a time. */
export async function sweepOnce(deps: SweepDeps): Promise<SweepReport> {
  const { chats, indexed, cursor } = await pickChats(deps);
  const report: SweepReport = {
    indexed,
    checked: 0,
    idle: 0,
    leased: 0,
    queued: 0,
    requeuedCount: 0,
    requeued: [],
    cursor,
  };
  let next = 0;
  const runners = Array.from({ length: Math.min(CHECK_CONCURRENCY, chats.length) }, async () => {
    while (next < chats.length) {
      const chatKey = chats[next++]!;
      const verdict = await sweepChat(deps, chatKey);
      report.checked += 1;
      if (verdict === 'requeued') {
        report.requeuedCount += 1;
        if (report.requeued.length < REPORT_KEYS) report.requeued.push(chatKey);
        deps.logger.warn({ chatKey }, 'sweeper re-enqueued a chat with pending messages and no job');
      } else {
        report[verdict] += 1;
      }
    }
  });
  await Promise.all(runners);
  return report;
}

export interface SweeperOptions extends SweepDeps {
  prefix: string;
  connection: ConnectionOptions;
  intervalMs: number;
  /**
   * CHAT_TTL_DAYS: when ttlMs > 0 this worker upserts the expiry scheduler. An expiry job
   * taken by a worker without it (ttlMs 0) does nothing: turning it off takes effect at once.
   */
  expiry?: { ttlMs: number; intervalMs: number; queues: Queue[] };
}

export interface SweeperHandle {
  worker: Worker;
  queue: Queue;
  /** Upsert the fleet's scheduler and start running sweeps. */
  run(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The sweeper's queue and BullMQ worker, built but not running: `run()` upserts the fleet's
 * sweep scheduler (every worker does; the last upsert's interval wins) and starts taking
 * sweeps, one at a time. Nothing is written to Redis before `run()`.
 */
export async function prepareSweeper(opts: SweeperOptions): Promise<SweeperHandle> {
  const { logger } = opts;
  const queue = createQueue(opts.prefix, QUEUES.maintenance, opts.connection);
  const worker = new Worker(
    QUEUES.maintenance,
    async (job) => {
      if (job.name === EXPIRY_JOB_NAME) {
        const { ttlMs = 0, queues = [] } = opts.expiry ?? {};
        return expireIdleChats({ store: opts.store, queues, ttlMs, batch: opts.batch, logger });
      }
      if (job.name !== SWEEP_JOB_NAME) throw new UnrecoverableError(`unknown maintenance job ${job.name}`);
      const started = Date.now();
      const report = await sweepOnce(opts);
      const log = { ...report, requeued: report.requeued.slice(0, 10), ms: Date.now() - started };
      if (report.requeuedCount > 0) logger.info(log, 'sweep done');
      else logger.debug(log, 'sweep done');
      return report;
    },
    {
      ...queueOptions(opts.prefix, QUEUES.maintenance, opts.connection),
      concurrency: 1,
      metrics: { maxDataPoints: MetricsTime.ONE_WEEK },
      autorun: false,
    },
  );
  worker.on('failed', (job, err) => logger.warn({ jobId: job?.id, err }, 'sweep failed'));
  worker.on('error', (err) => logger.error({ err }, 'sweeper error'));
  await worker.waitUntilReady();

  let closing: Promise<void> | undefined;
  return {
    worker,
    queue,
    async run() {
      await queue.upsertJobScheduler(
        SWEEPER_SCHEDULER_ID,
        { every: opts.intervalMs },
        {
          name: SWEEP_JOB_NAME,
          data: {},
          // A failed sweep is not retried: the next one comes within an interval anyway.
          opts: { attempts: 1, removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } },
        },
      );
      if (opts.expiry && opts.expiry.ttlMs > 0) {
        await queue.upsertJobScheduler(
          EXPIRY_SCHEDULER_ID,
          { every: opts.expiry.intervalMs },
          {
            name: EXPIRY_JOB_NAME,
            data: {},
            opts: { attempts: 1, removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } },
          },
        );
      }
      worker.run().catch((err: unknown) => logger.error({ err }, 'sweeper stopped'));
    },
    close() {
      // The scheduler stays: the rest of the fleet keeps sweeping.
      closing ??= (async () => {
        await worker.close().catch((err: unknown) => logger.warn({ err }, 'sweeper close failed'));
        await queue.close().catch((err: unknown) => logger.warn({ err }, 'queue close failed'));
      })();
      return closing;
    },
  };
}
