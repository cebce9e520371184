import { hostname } from 'node:os';
import type { Queue, Worker } from 'bullmq';
import type { Config } from '../../shared/config.js';
import type { SenderRegistry } from '../../shared/delivery/sender.js';
import { createSenders } from '../../shared/delivery/senders.js';
import type { EventSink } from '../../shared/events.js';
import { createQueue, type DeliveryJob, QUEUES } from '../../shared/jobs.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import type { RedisClient } from '../../shared/redis.js';
import { DeliveryStore } from '../../shared/store/delivery.js';
import { ReplyStreams } from '../../shared/store/reply-streams.js';
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
  {
    senders: sendersGiven,
    metrics,
    events,
  }: { senders?: SenderRegistry; metrics: Metrics; events?: EventSink | undefined },
): Promise<DeliveryParts> {
  const senders = sendersGiven ?? (await createSenders(config, logger));
  const queue = createQueue<DeliveryJob>(config.CHATLANE_PREFIX, QUEUES.deliveries, connection);
  const streaming = streamingSettingsFromConfig(config, connection);
  const worker = createDeliveryWorker(
    {
      store: new DeliveryStore(
        connection,
        config.CHATLANE_PREFIX,
        config.EVENTS_MAX_LEN,
        !!streaming,
        events,
        config.OUTBOX_KEEP_ITEMS,
      ),
      ...(streaming && { streaming }),
      senders,
      settings: deliverySettingsFromConfig(config),
      workerId: `${hostname()}:${process.pid}`,
      logger,
      metrics,
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
      // Only what it opened: given senders are their owner's to close.
      if (!sendersGiven) await senders.close();
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
