import type { Worker } from 'bullmq';
import { type Config, requireModel } from '../../shared/config.js';
import type { CompactionJob } from '../../shared/jobs.js';
import type { Logger } from '../../shared/logger.js';
import { checkRedisPolicy, closeRedis, createRedisClient } from '../../shared/redis.js';
import { ChatStore } from '../../shared/store/chat-store.js';
import { createModel } from '../agent/model.js';
import type { CompactionDeps } from './compact.js';
import { createCompactionWorker } from './compactor.js';

export function compactionDepsFromConfig(config: Config, store: ChatStore, logger: Logger): CompactionDeps {
  const base = requireModel(config);
  const modelName = config.COMPACTION_MODEL ?? base.model;
  return {
    store,
    model: createModel({ ...base, model: modelName }),
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
export async function startCompactor(config: Config, logger: Logger): Promise<CompactorHandle> {
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
  });
  worker.run().catch((err: unknown) => logger.error({ err }, 'compaction worker stopped'));
  await worker.waitUntilReady();
  await checkRedisPolicy(connection, logger);
  logger.info(
    { concurrency: config.COMPACTION_CONCURRENCY, model: config.COMPACTION_MODEL ?? config.LLM_MODEL },
    'compactor started',
  );

  let closing: Promise<void> | undefined;
  return {
    worker,
    close() {
      closing ??= (async () => {
        await worker.close().catch((err: unknown) => logger.warn({ err }, 'compactor close failed'));
        await closeRedis(connection);
      })();
      return closing;
    },
  };
}
