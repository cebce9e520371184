import { DelayedError, type Job, MetricsTime, type Queue, UnrecoverableError, Worker } from 'bullmq';
import { enqueueTurn, QUEUES, queueOptions, type TurnJob, turnJobSchema } from '../shared/jobs.js';
import type { Metrics } from '../shared/metrics.js';
import type { RedisClient } from '../shared/redis.js';
import { instrumentTurnProcessor } from './instrument.js';
import { bullmqLockRenewTime } from './liveness.js';
import { runTurn, type TurnDeps, type TurnOutcome } from './turn.js';

export interface TurnWorkerOptions {
  prefix: string;
  connection: RedisClient;
  concurrency: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  turns: Queue<TurnJob>;
  onOutcome?: (outcome: TurnOutcome, job: Job<TurnJob>) => void;
  /** Turn duration by outcome, queue wait and fence rejections go here when given. */
  metrics?: Metrics;
}

/** Small jitter so workers that met on a busy lease do not meet again. */
const jitter = () => Math.floor(Math.random() * 100);

/**
 * The BullMQ side of turns: one job = one turn attempt for one chat. A chat with messages
 * left after its turn is re-added, so it queues behind every other waiting chat (fairness).
 */
export function createTurnWorker(deps: TurnDeps, opts: TurnWorkerOptions): Worker<TurnJob> {
  const processor = async (job: Job<TurnJob>, token?: string): Promise<TurnOutcome> => {
    const parsed = turnJobSchema.safeParse(job.data);
    if (!parsed.success)
      throw new UnrecoverableError(`bad turn job data: ${parsed.error.issues[0]?.message}`);
    const { chatKey } = parsed.data;
    const logger = deps.logger.child({ jobId: job.id, chatKey });
    const outcome = await runTurn({ ...deps, logger }, chatKey);

    if (outcome.status === 'busy') {
      // Another turn (possibly a stalled one whose lease has not run out) holds the chat:
      // come back when its lease ends, keeping this job (and its dedup slot).
      await job.moveToDelayed(Date.now() + outcome.retryInMs + jitter(), token);
      throw new DelayedError();
    }
    if (outcome.status !== 'lost' && outcome.pending > 0) await enqueueTurn(opts.turns, chatKey);
    opts.onOutcome?.(outcome, job);
    return outcome;
  };

  const run = opts.metrics ? instrumentTurnProcessor(processor, opts.metrics, QUEUES.turns) : processor;
  const worker = new Worker<TurnJob>(QUEUES.turns, run, {
    ...queueOptions(opts.prefix, QUEUES.turns, opts.connection),
    concurrency: opts.concurrency,
    lockDuration: opts.lockDurationMs,
    lockRenewTime: bullmqLockRenewTime(opts.lockDurationMs),
    stalledInterval: opts.stalledIntervalMs,
    maxStalledCount: 3,
    // BullMQ's per-minute completed/failed counts: bullmq_job_*_total on /metrics, Bull Board's graphs.
    metrics: { maxDataPoints: MetricsTime.ONE_WEEK },
    autorun: false,
  });
  worker.on('failed', (job, err) => {
    deps.logger.warn({ jobId: job?.id, chatKey: job?.data?.chatKey, err }, 'turn failed');
  });
  worker.on('error', (err) => deps.logger.error({ err }, 'turn worker error'));
  return worker;
}
