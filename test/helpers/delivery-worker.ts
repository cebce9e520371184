import type { Queue, Worker } from 'bullmq';
import type { SenderRegistry } from '../../src/shared/delivery/sender.js';
import { createQueue, type DeliveryJob, enqueueDelivery, QUEUES } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { Metrics } from '../../src/shared/metrics.js';
import type { RedisClient } from '../../src/shared/redis.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { writeOutbox } from '../../src/worker/agent/tools/outbox.js';
import type { DeliverySettings } from '../../src/worker/delivery/deliver.js';
import { createDeliveryWorker } from '../../src/worker/delivery/delivery-worker.js';
import type { StreamingSettings } from '../../src/worker/delivery/stream-posts.js';

export interface TestDelivery {
  queue: Queue<DeliveryJob>;
  worker: Worker<DeliveryJob>;
  close(): Promise<void>;
}

/**
 * The delivery worker a worker process runs, in-process, with quick retries; with `streaming`
 * as PLATFORM_STREAMING=on runs it (reading the reply streams under `prefix`).
 */
export function testDeliveryWorker(
  redis: RedisClient,
  prefix: string,
  senders: SenderRegistry,
  settings: Partial<DeliverySettings> = {},
  metrics?: Metrics,
  streaming?: Omit<StreamingSettings, 'replies'>,
): TestDelivery {
  const queue = createQueue<DeliveryJob>(prefix, QUEUES.deliveries, redis);
  const replies = new ReplyStreams(redis, { prefix, maxEvents: 100, maxLen: 1000, ttlMs: 60_000 });
  const worker = createDeliveryWorker(
    {
      store: new DeliveryStore(redis, prefix, 100, streaming !== undefined),
      ...(streaming && { streaming: { ...streaming, replies } }),
      senders,
      settings: {
        maxAttempts: 5,
        backoffMs: 50,
        backoffMaxMs: 200,
        timeoutMs: 2000,
        batch: 10,
        maxItemsPerJob: 100,
        maxJobMs: 10_000,
        ...settings,
      },
      workerId: 'test',
      logger: silentLogger(),
      ...(metrics && { metrics }),
    },
    {
      prefix,
      connection: redis,
      concurrency: 4,
      lockDurationMs: 5000,
      stalledIntervalMs: 5000,
      deliveries: queue,
    },
  );
  void worker.run();
  return {
    queue,
    worker,
    async close() {
      await worker.close(true);
      await queue.close();
    },
  };
}

/** Fenced outbox writes under `fence`, each followed by the delivery trigger, as a turn's `chat_send` does; the ids in order. */
export async function writeReplies(
  store: ChatStore,
  queue: Queue<DeliveryJob>,
  chatKey: string,
  fence: string,
  texts: string[],
): Promise<string[]> {
  const ids: string[] = [];
  for (const text of texts) {
    const res = await writeOutbox(
      { store, deliver: (c) => enqueueDelivery(queue, c), logger: silentLogger() },
      chatKey,
      fence,
      { runId: 'r1', text, ts: Date.now() },
    );
    if (!res.ok) throw new Error('fenced out');
    ids.push(res.id);
  }
  return ids;
}

/** Replies as a turn writes them: under the chat's lease, fenced outbox writes, then the delivery trigger; the lease is released after. */
export async function replyAsTurn(
  store: ChatStore,
  queue: Queue<DeliveryJob>,
  chatKey: string,
  texts: string[],
): Promise<string[]> {
  const lease = await store.acquire(chatKey, `turn-${chatKey}`, 60_000);
  if (!lease.ok) throw new Error('busy');
  const ids = await writeReplies(store, queue, chatKey, lease.fence, texts);
  await store.finish(chatKey, lease.fence, `turn-${chatKey}`, 'r1');
  return ids;
}
