import type { Job } from 'bullmq';
import { MetricsTime, UnrecoverableError, Worker } from '../../shared/bullmq.js';
import { type CompactionJob, compactionJobSchema, QUEUES, queueOptions } from '../../shared/jobs.js';
import { bullmqLockRenewTime } from '../../shared/liveness.js';
import { type Metrics, recordCompactionRun } from '../../shared/metrics.js';
import type { RedisClient } from '../../shared/redis.js';
import { inSpan } from '../../shared/tracing/spans.js';
import { type CompactionDeps, type CompactionResult, compactChat, StaleCompactionError } from './compact.js';

export interface CompactorOptions {
  prefix: string;
  connection: RedisClient;
  concurrency: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  metrics?: Metrics;
}

/**
 * The `compaction` queue's consumer. A stale result (the history moved while the model
 * summarised) is thrown so BullMQ retries with backoff and the next attempt recomputes.
 */
export function createCompactionWorker(deps: CompactionDeps, opts: CompactorOptions): Worker<CompactionJob> {
  const processor = async (job: Job<CompactionJob>): Promise<CompactionResult> => {
    const parsed = compactionJobSchema.safeParse(job.data);
    if (!parsed.success)
      throw new UnrecoverableError(`bad compaction job: ${parsed.error.issues[0]?.message}`);
    const logger = deps.logger.child({ jobId: job.id, chatKey: parsed.data.chatKey });
    let result: CompactionResult;
    try {
      result = await inSpan(
        'chatlane.compaction',
        { attributes: { 'chatlane.chat_key': parsed.data.chatKey } },
        async (span) => {
          const compacted = await compactChat({ ...deps, logger }, parsed.data.chatKey);
          span?.setAttribute('chatlane.compaction.status', compacted.status);
          return compacted;
        },
      );
    } catch (err) {
      if (opts.metrics) recordCompactionRun(opts.metrics, 'failed');
      throw err;
    }
    if (opts.metrics) {
      const label =
        result.status === 'applied' ? 'applied' : result.status === 'stale' ? 'conflict' : 'skipped';
      const saved = result.status === 'applied' ? result.tokensBefore - result.tokensAfter : 0;
      recordCompactionRun(opts.metrics, label, saved);
    }
    if (result.status === 'stale')
      throw new StaleCompactionError(`history changed (${result.reason}); recomputing`);
    return result;
  };
  const worker = new Worker<CompactionJob>(QUEUES.compaction, processor, {
    ...queueOptions(opts.prefix, QUEUES.compaction, opts.connection),
    concurrency: opts.concurrency,
    lockDuration: opts.lockDurationMs,
    lockRenewTime: bullmqLockRenewTime(opts.lockDurationMs),
    stalledInterval: opts.stalledIntervalMs,
    // Per-minute completed/failed counts in Redis: bullmq_job_*_total, Bull Board's graphs.
    metrics: { maxDataPoints: MetricsTime.ONE_WEEK },
    autorun: false,
  });
  worker.on('failed', (job, err) =>
    deps.logger.warn({ jobId: job?.id, chatKey: job?.data?.chatKey, err: err.message }, 'compaction failed'),
  );
  worker.on('error', (err) => deps.logger.error({ err }, 'compaction worker error'));
  return worker;
}
