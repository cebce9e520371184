import type { Worker } from 'bullmq';
import { type Config, requireModel } from '../../shared/config.js';
import { type CompactionJob, createQueue, QUEUES } from '../../shared/jobs.js';
import type { Logger } from '../../shared/logger.js';
import { processMetrics } from '../../shared/metrics.js';
import { checkRedisPolicy, closeRedis, createRedisClient } from '../../shared/redis.js';
import { ChatStore } from '../../shared/store/chat-store.js';
import { createModel } from '../agent/model.js';
import { meteredModel } from '../instrument.js';
import { startSideServer } from '../side-server.js';
import type { CompactionDeps } from './compact.js';
import { createCompactionWorker } from './compactor.js';

export function compactionDepsFromConfig(config: Config, store: ChatStore, logger: Logger): CompactionDeps {
  const base = requireModel(config);
  const modelName = config.COMPACTION_MODEL ?? base.model;
  return {
    store,
    model: meteredModel(createModel({ ...base, model: modelName }), processMetrics()),
    modelName,
    logger,
    settings: {
      keepLast: config.HISTORY_KEEP_LAST_MESSAGES,
      keepRecentTokens: config.KEEP_RECENT_TOKENS,
      maxOutputTokens: config.COMPACTION_MAX_TOKENS,
      archive: config.ARCHIVE_ON_COMPACT,
      maxEvents: config.EVENTS_MAX_LEN,
    },
  };
}

export interface CompactorHandle {
  worker: Worker<CompactionJob>;
  close(): Promise<void>;
}

/** `chatlane compactor`: consumes the compaction queue; needs a model like a worker does. */
export async function startCompactor(
  config: Config,
  logger: Logger,
  // In `all` the worker's side server already serves this process.
  { sideServer = true }: { sideServer?: boolean } = {},
): Promise<CompactorHandle> {
  requireModel(config);
  const connection = createRedisClient(config, 'worker', 'chatlane:compactor');
  const store = new ChatStore(connection, {
    prefix: config.CHATLANE_PREFIX,
    maxEvents: config.EVENTS_MAX_LEN,
  });
  const worker = createCompactionWorker(compactionDepsFromConfig(config, store, logger), {
    prefix: config.CHATLANE_PREFIX,
    connection,
    concurrency: config.COMPACTION_CONCURRENCY,
    lockDurationMs: config.JOB_LOCK_MS,
    stalledIntervalMs: config.STALLED_INTERVAL_MS,
    metrics: processMetrics(),
  });
  worker.run().catch((err: unknown) => logger.error({ err }, 'compaction worker stopped'));
  await worker.waitUntilReady();
  await checkRedisPolicy(connection, logger);
  const queue = createQueue(config.CHATLANE_PREFIX, QUEUES.compaction, connection);
  const side = sideServer
    ? await startSideServer({
        host: config.HOST,
        port: config.METRICS_PORT,
        metrics: processMetrics(),
        redis: connection,
        isRunning: () => worker.isRunning() && !worker.closing,
        queues: [queue],
        logger,
        role: 'compactor',
      }).catch(async (err: unknown) => {
        await worker.close().catch(() => undefined);
        await queue.close().catch(() => undefined);
        await closeRedis(connection);
        throw err;
      })
    : undefined;
  logger.info(
    {
      concurrency: config.COMPACTION_CONCURRENCY,
      model: config.COMPACTION_MODEL ?? config.LLM_MODEL,
      metricsUrl: side?.url,
    },
    'compactor started',
  );

  let closing: Promise<void> | undefined;
  return {
    worker,
    close() {
      closing ??= (async () => {
        await side?.close();
        await worker.close().catch((err: unknown) => logger.warn({ err }, 'compactor close failed'));
        await queue.close().catch((err: unknown) => logger.warn({ err }, 'queue close failed'));
        await closeRedis(connection);
      })();
      return closing;
    },
  };
}
