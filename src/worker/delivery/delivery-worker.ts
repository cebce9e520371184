import type { Job, Queue } from 'bullmq';
import { DelayedError, MetricsTime, UnrecoverableError, Worker } from '../../shared/bullmq.js';
import {
  type DeliveryJob,
  deliveryJobSchema,
  enqueueDelivery,
  QUEUES,
  queueOptions,
} from '../../shared/jobs.js';
import { bullmqLockRenewTime } from '../../shared/liveness.js';
import type { Metrics } from '../../shared/metrics.js';
import type { RedisClient } from '../../shared/redis.js';
import { type DeliveryDeps, type DeliveryOutcome, deliverChat } from './deliver.js';

export interface DeliveryWorkerOptions {
  prefix: string;
  connection: RedisClient;
  concurrency: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  deliveries: Queue<DeliveryJob>;
  metrics?: Metrics;
  onOutcome?: (outcome: DeliveryOutcome, job: Job<DeliveryJob>) => void;
}

const jitter = () => Math.floor(Math.random() * 100);

/**
 * The BullMQ side of delivery: one job = one pass over one chat's undelivered outbox. A
 * retry or a busy lease delays the job (keeping its deduplication slot, so later triggers
 * fold into it) instead of sleeping in a worker slot; a chat with more left than one job may
 * send is re-added behind the other chats.
 */
export function createDeliveryWorker(deps: DeliveryDeps, opts: DeliveryWorkerOptions): Worker<DeliveryJob> {
  const processor = async (job: Job<DeliveryJob>, token?: string): Promise<DeliveryOutcome> => {
    const parsed = deliveryJobSchema.safeParse(job.data);
    if (!parsed.success)
      throw new UnrecoverableError(`bad delivery job data: ${parsed.error.issues[0]?.message}`);
    const { chatKey } = parsed.data;
    const outcome = await deliverChat(
      { ...deps, logger: deps.logger.child({ jobId: job.id, chatKey }) },
      chatKey,
    );
    opts.onOutcome?.(outcome, job);
    if (outcome.status === 'busy' || outcome.status === 'retry') {
      const inMs = outcome.status === 'busy' ? outcome.retryInMs + jitter() : outcome.inMs;
      await job.moveToDelayed(Date.now() + inMs, token);
      throw new DelayedError();
    }
    if (outcome.status === 'done' && outcome.more) await enqueueDelivery(opts.deliveries, chatKey);
    return outcome;
  };

  const worker = new Worker<DeliveryJob>(QUEUES.deliveries, processor, {
    ...queueOptions(opts.prefix, QUEUES.deliveries, opts.connection),
    concurrency: opts.concurrency,
    lockDuration: opts.lockDurationMs,
    // Renewed like every job lock (shared/liveness.ts): a dead worker's deliveries resume soon.
    lockRenewTime: bullmqLockRenewTime(opts.lockDurationMs),
    stalledInterval: opts.stalledIntervalMs,
    maxStalledCount: 3,
    metrics: { maxDataPoints: MetricsTime.ONE_WEEK },
    autorun: false,
  });
  worker.on('failed', (job, err) => {
    deps.logger.warn({ jobId: job?.id, chatKey: job?.data?.chatKey, err }, 'delivery job failed');
  });
  worker.on('error', (err) => deps.logger.error({ err }, 'delivery worker error'));
  return worker;
}
