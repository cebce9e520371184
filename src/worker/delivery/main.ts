import { hostname } from 'node:os';
import type { Queue, Worker } from 'bullmq';
import type { Config } from '../../shared/config.js';
import type { SenderRegistry } from '../../shared/delivery/sender.js';
import { createSenders } from '../../shared/delivery/senders.js';
import { createQueue, type DeliveryJob, QUEUES } from '../../shared/jobs.js';
import type { Logger } from '../../shared/logger.js';
import { processMetrics } from '../../shared/metrics.js';
import { checkRedisPolicy, closeRedis, createRedisClient, type RedisClient } from '../../shared/redis.js';
import { DeliveryStore } from '../../shared/store/delivery.js';
import { ReplyStreams } from '../../shared/store/reply-streams.js';
import { startRoleSideServer } from '../process/side-server.js';
import { Opened, type Prepared, runPrepared } from '../process/startup.js';
import { DELIVERY_DEFAULTS, type DeliverySettings } from './deliver.js';
import { createDeliveryWorker } from './delivery-worker.js';
import type { StreamingSettings } from './stream-posts.js';

export function deliverySettingsFromConfig(config: Config): DeliverySettings {
  return {
    ...DELIVERY_DEFAULTS,
    maxAttempts: config.DELIVERY_MAX_ATTEMPTS,
    backoffMs: config.DELIVERY_BACKOFF_MS,
    backoffMaxMs: Math.max(config.DELIVERY_BACKOFF_MS, config.DELIVERY_BACKOFF_MAX_MS),
    timeoutMs: config.DELIVERY_TIMEOUT_MS,
  };
}

/**
 * PLATFORM_STREAMING=on: how delivery reads the reply streams. A writer silent for one send's
 * limit is taken for dead (the turn lease expires about then too); one part is followed at
 * most ten sends' limits, then its post waits for the item to complete it.
 */
export function streamingSettingsFromConfig(
  config: Config,
  redis: RedisClient,
): StreamingSettings | undefined {
  if (config.PLATFORM_STREAMING !== 'on') return undefined;
  return {
    replies: new ReplyStreams(redis, {
      prefix: config.CHATLANE_PREFIX,
      maxEvents: config.EVENTS_MAX_LEN,
      maxLen: config.REPLY_STREAM_MAX_LEN,
      ttlMs: config.REPLY_STREAM_TTL_MS,
    }),
    pollMs: 50,
    idleMs: config.DELIVERY_TIMEOUT_MS,
    maxFollowMs: 10 * config.DELIVERY_TIMEOUT_MS,
  };
}

/** The delivery worker built on a connection, not yet running (startup order step 2). */
export interface DeliveryParts {
  worker: Worker<DeliveryJob>;
  queue: Queue<DeliveryJob>;
  senders: SenderRegistry;
  run(): void;
  close(): Promise<void>;
}

export async function buildDeliveryWorker(
  config: Config,
  logger: Logger,
  connection: RedisClient,
  sendersGiven?: SenderRegistry,
): Promise<DeliveryParts> {
  const senders = sendersGiven ?? (await createSenders(config, logger));
  const queue = createQueue<DeliveryJob>(config.CHATLANE_PREFIX, QUEUES.deliveries, connection);
  const streaming = streamingSettingsFromConfig(config, connection);
  const worker = createDeliveryWorker(
    {
      store: new DeliveryStore(connection, config.CHATLANE_PREFIX, config.EVENTS_MAX_LEN, !!streaming),
      ...(streaming && { streaming }),
      senders,
      settings: deliverySettingsFromConfig(config),
      workerId: `${hostname()}:${process.pid}`,
      logger,
      metrics: processMetrics(),
    },
    {
      prefix: config.CHATLANE_PREFIX,
      connection,
      concurrency: config.DELIVERY_CONCURRENCY,
      lockDurationMs: config.JOB_LOCK_MS,
      stalledIntervalMs: config.STALLED_INTERVAL_MS,
      deliveries: queue,
    },
  );
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      await worker.close().catch((err: unknown) => logger.warn({ err }, 'delivery worker close failed'));
      await queue.close().catch((err: unknown) => logger.warn({ err }, 'queue close failed'));
      await senders.close();
    })();
    return closing;
  };
  try {
    await worker.waitUntilReady();
  } catch (err) {
    await close();
    throw err;
  }
  return {
    worker,
    queue,
    senders,
    run() {
      worker.run().catch((err: unknown) => logger.error({ err }, 'delivery worker stopped'));
    },
    close,
  };
}

export interface DeliveryHandle {
  worker: Worker<DeliveryJob>;
  metricsUrl: string;
  close(): Promise<void>;
}

export interface PreparedDelivery extends Prepared<DeliveryHandle> {
  metricsUrl: string;
}

/**
 * `chatlane delivery`: only the delivery worker, for operators who keep outbound traffic
 * (platform tokens, webhook egress) apart from the model workers or scale it separately.
 * It needs no model. Steps 1–3 of the startup order (`../process/startup.ts`); jobs after `run()`.
 */
export async function prepareDelivery(
  config: Config,
  logger: Logger,
  { senders }: { senders?: SenderRegistry } = {},
): Promise<PreparedDelivery> {
  // 1. Checks: the senders read their configuration.
  const registry = senders ?? (await createSenders(config, logger));

  // 2. Connections.
  const opened = new Opened();
  opened.add(() => registry.close());
  const connection = createRedisClient(config, 'worker', 'chatlane:delivery');
  opened.add(() => closeRedis(connection));
  const parts = await opened.step(() => buildDeliveryWorker(config, logger, connection, registry));
  opened.add(() => parts.close());
  await opened.step(() => checkRedisPolicy(connection, logger));

  // 3. Listeners.
  const side = await opened.step(() =>
    startRoleSideServer(config, {
      role: 'delivery',
      metrics: processMetrics(),
      redis: connection,
      isRunning: () => parts.worker.isRunning() && !parts.worker.closing,
      logger,
    }),
  );
  opened.add(() => side.close());

  // 4. Run (on `run()`).
  let closing: Promise<void> | undefined;
  const handle: DeliveryHandle = {
    worker: parts.worker,
    metricsUrl: side.url,
    close() {
      closing ??= (async () => {
        await parts.close();
        await side.close();
        await closeRedis(connection);
      })();
      return closing;
    },
  };
  let ran = false;
  return {
    metricsUrl: side.url,
    async run() {
      ran = true;
      parts.run();
      logger.info(
        { concurrency: config.DELIVERY_CONCURRENCY, channels: registry.channels(), metricsUrl: side.url },
        'delivery started',
      );
      return handle;
    },
    close: () => (ran ? handle.close() : opened.closeAll()),
  };
}

export async function startDelivery(config: Config, logger: Logger): Promise<DeliveryHandle> {
  return runPrepared(await prepareDelivery(config, logger));
}
