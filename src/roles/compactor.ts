import type { LanguageModel } from 'ai';
import type { Worker } from 'bullmq';
import { type Config, requireCompactionModel } from '../shared/config.js';
import type { EventSink } from '../shared/events.js';
import type { CompactionJob } from '../shared/jobs.js';
import type { Logger } from '../shared/logger.js';
import { createMetrics, type Metrics } from '../shared/metrics.js';
import { startRoleSideServer } from '../shared/process/side-server.js';
import { Opened, type Prepared } from '../shared/process/startup.js';
import { checkRedisPolicy, closeRedis, createRedisClient } from '../shared/redis.js';
import { RedisWatch } from '../shared/redis-watch.js';
import { storeRetentionOf } from '../shared/retention.js';
import { ChatStore } from '../shared/store/chat-store.js';
import { loadProviders } from '../worker/agent/providers.js';
import { compactionDepsFromConfig } from '../worker/compaction/compaction-deps.js';
import { createCompactionWorker } from '../worker/compaction/compactor.js';

export interface CompactorHandle {
  worker: Worker<CompactionJob>;
  /** The side server's URL; undefined in `all`, where the worker's side server serves the process. */
  metricsUrl: string | undefined;
  close(): Promise<void>;
}

export interface PreparedCompactor extends Prepared<CompactorHandle> {
  metricsUrl: string | undefined;
}

/**
 * `chatlane compactor`, steps 1–3 of the startup order (`../shared/process/startup.ts`): checks (it needs a
 * model like a worker does), connections, side server bound. No job is taken until `run()`.
 */
export interface CompactorParts {
  /** The instance's metrics (default: a registry of its own). */
  metrics?: Metrics;
  /** In `all` the worker's side server already serves this process. */
  sideServer?: boolean;
  /** A model given in code in place of LLM_MODEL (unless COMPACTION_MODEL names one). */
  model?: LanguageModel;
  /** A program's onEvent, through an EventFeed: the events this role writes. */
  events?: EventSink | undefined;
}

export async function prepareCompactor(
  config: Config,
  logger: Logger,
  { sideServer = true, model, ...parts }: CompactorParts = {},
): Promise<PreparedCompactor> {
  // 1. Checks.
  const models = model && !config.COMPACTION_MODEL ? undefined : requireCompactionModel(config);
  const metrics = parts.metrics ?? createMetrics();

  // 2. Connections.
  const providers = await loadProviders(...(models ? [models] : []));
  const opened = new Opened();
  const connection = createRedisClient(config, 'worker', 'chatlane:compactor');
  opened.add(() => closeRedis(connection));
  // Nothing else is built until Redis answers (see prepareWorker).
  const watch = new RedisWatch(config, logger);
  watch.add(connection);
  await opened.step(() => watch.ready());
  const store = new ChatStore(connection, {
    prefix: config.CHATLANE_PREFIX,
    maxEvents: config.EVENTS_MAX_LEN,
    retention: storeRetentionOf(config),
    events: parts.events,
  });
  const deps = compactionDepsFromConfig(config, store, logger, {
    metrics,
    providers,
    ...(model && { model }),
  });
  const worker = createCompactionWorker(deps, {
    prefix: config.CHATLANE_PREFIX,
    connection,
    concurrency: config.COMPACTION_CONCURRENCY,
    lockDurationMs: config.JOB_LOCK_MS,
    stalledIntervalMs: config.STALLED_INTERVAL_MS,
    metrics,
  });
  opened.add(() => worker.close());
  await opened.step(async () => {
    await worker.waitUntilReady();
    await checkRedisPolicy(connection, logger);
  });

  // 3. Listeners.
  const side = sideServer
    ? await opened.step(() =>
        startRoleSideServer(config, {
          role: 'compactor',
          metrics,
          redis: connection,
          isRunning: () => worker.isRunning() && !worker.closing,
          logger,
          detail: () => ({ models: deps.modelHealth.models() }),
        }),
      )
    : undefined;
  if (side) opened.add(() => side.close());

  // 4. Run (on `run()`).
  let closing: Promise<void> | undefined;
  const handle: CompactorHandle = {
    worker,
    metricsUrl: side?.url,
    close() {
      closing ??= (async () => {
        await side?.close();
        await worker.close().catch((err: unknown) => logger.warn({ err }, 'compactor close failed'));
        await closeRedis(connection);
      })();
      return closing;
    },
  };
  let ran = false;
  return {
    metricsUrl: side?.url,
    async run() {
      ran = true;
      worker.run().catch((err: unknown) => logger.error({ err }, 'compaction worker stopped'));
      logger.info(
        {
          concurrency: config.COMPACTION_CONCURRENCY,
          models: Object.keys(deps.modelHealth.models()),
          metricsUrl: side?.url,
        },
        'compactor started',
      );
      return handle;
    },
    close: () => (ran ? handle.close() : opened.closeAll()),
  };
}
