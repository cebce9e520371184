import type { Worker } from 'bullmq';
import type { IngressApp } from '../../src/ingress/app.js';
import { loadConfig } from '../../src/shared/config.js';
import { createSenders } from '../../src/shared/delivery/senders.js';
import { createQueue, type DeliveryJob, enqueueDelivery, QUEUES } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import { createMetrics, type Metrics } from '../../src/shared/metrics.js';
import type { GroupMode } from '../../src/shared/platforms/platform.js';
import { type PlatformRuntime, startPlatformRuntime } from '../../src/shared/platforms/runtime.js';
import type { RedisClient } from '../../src/shared/redis.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { createDeliveryWorker } from '../../src/worker/delivery/delivery-worker.js';
import { writeReplies } from './delivery-worker.js';
import { testIngress } from './ingress.js';
import { REDIS_ENV, waitFor } from './redis.js';

/**
 * A platform's whole path in one process, built the way `chatlane` builds it: the config
 * parsed from the platform's variables (pointing its adapter at a local fake API), the
 * ingress with its Chat SDK runtime and `POST /webhooks/:platform`, and a delivery worker
 * whose senders come from `createSenders` (their own Chat SDK runtime, as in a worker
 * process). `reply` writes outbox items the way a turn does (fenced) and triggers delivery.
 */
export interface PlatformStack {
  app: IngressApp;
  store: ChatStore;
  runtime: PlatformRuntime;
  /** The delivery worker's metrics (chatlane_delivery_failures_total{channel}, ...). */
  metrics: Metrics;
  reply(chatKey: string, texts: string[]): Promise<string[]>;
  /** Asks for the chat's delivery (what a worker's turn does after writing its outbox). */
  deliver(chatKey: string): Promise<void>;
  /** The chat's `delivery.failed` events' data, once there is at least one. */
  failedDeliveries(chatKey: string): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

export interface PlatformStackOptions {
  groupMode?: GroupMode;
  /** Start a delivery worker (default true). */
  delivery?: boolean;
  maxAttempts?: number;
}

export async function platformStack(
  redis: RedisClient,
  prefix: string,
  env: Record<string, string>,
  opts: PlatformStackOptions = {},
): Promise<PlatformStack> {
  const config = loadConfig({ ...REDIS_ENV, CHATLANE_PREFIX: prefix, LOG_LEVEL: 'silent', ...env });
  const logger = silentLogger();
  const runtime = await startPlatformRuntime(config, redis, logger);
  const ing = await testIngress(redis, prefix, {
    platforms: { runtime, groupMode: opts.groupMode ?? 'mentions' },
  });
  const { app, store } = ing;

  const deliveries = createQueue<DeliveryJob>(prefix, QUEUES.deliveries, redis);
  let worker: Worker<DeliveryJob> | undefined;
  const senders = await createSenders(config, logger);
  const metrics = createMetrics({ defaultMetrics: false });
  if (opts.delivery !== false) {
    worker = createDeliveryWorker(
      {
        store: new DeliveryStore(redis, prefix, 100),
        senders,
        settings: {
          maxAttempts: opts.maxAttempts ?? 5,
          backoffMs: 50,
          backoffMaxMs: 200,
          timeoutMs: 5000,
          batch: 10,
          maxItemsPerJob: 100,
          maxJobMs: 10_000,
        },
        workerId: 'test',
        logger,
        metrics,
      },
      {
        prefix,
        connection: redis,
        concurrency: 4,
        lockDurationMs: 10_000,
        stalledIntervalMs: 5000,
        deliveries,
      },
    );
    void worker.run();
  }
  // BullMQ writes each queue's meta key once connected: let that settle before tests compare
  // keyspaces.
  for (const queue of [QUEUES.turns, QUEUES.deliveries]) {
    await waitFor(async () => (await redis.exists(`${prefix}:{q:${queue}}:${queue}:meta`)) === 1, {
      what: `${queue} queue meta`,
    });
  }

  // One turn's lease per chat for the whole test: later replies are that turn's next sends.
  const fences = new Map<string, string>();
  return {
    app,
    store,
    runtime,
    metrics,
    async reply(chatKey, texts) {
      let fence = fences.get(chatKey);
      if (fence === undefined) {
        const lease = await store.acquire(chatKey, `turn-${chatKey}`, 60_000);
        if (!lease.ok) throw new Error(`chat ${chatKey} is busy`);
        fence = lease.fence;
        fences.set(chatKey, fence);
      }
      return writeReplies(store, deliveries, chatKey, fence, texts);
    },
    deliver: (chatKey) => enqueueDelivery(deliveries, chatKey),
    async failedDeliveries(chatKey) {
      const failed = async () => {
        const events = await store.readEvents(chatKey, undefined, 100);
        const data = events.filter((e) => e.type === 'delivery.failed').map((e) => e.data);
        return data.length > 0 ? data : undefined;
      };
      return waitFor(failed, { what: `delivery.failed in ${chatKey}` });
    },
    async close() {
      await worker?.close(true);
      await senders.close();
      await deliveries.close();
      await ing.close();
      await runtime.close();
    },
  };
}
