import type { LanguageModel } from 'ai';
import type { Queue } from 'bullmq';
import { type DeliveryJob, enqueueDelivery } from '../../src/shared/jobs.js';
import type { RedisClient } from '../../src/shared/redis.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import type { OutboxItem } from '../../src/shared/store/records.js';
import type { StreamingSettings } from '../../src/worker/delivery/stream-posts.js';
import { runTurn, type TurnOutcome } from '../../src/worker/turn/turn.js';
import { waitFor } from './redis.js';
import { turnDeps } from './turn-deps.js';

/** Quick polls, and a writer silent 800 ms taken for stalled (a test's model pauses longer). */
export const STREAMING: Omit<StreamingSettings, 'replies'> = { pollMs: 20, idleMs: 800, maxFollowMs: 20_000 };

/** A real turn of `chatKey` on `model`, triggering `queue`'s delivery as a worker process does. */
export function answer(
  redis: RedisClient,
  prefix: string,
  queue: Queue<DeliveryJob>,
  chatKey: string,
  model: LanguageModel,
  opts: { platformStreaming?: boolean; maxSendsPerTurn?: number } = {},
): Promise<TurnOutcome> {
  const deps = turnDeps(redis, prefix, model, {
    ...(opts.maxSendsPerTurn !== undefined && { maxSendsPerTurn: opts.maxSendsPerTurn }),
  });
  return runTurn(
    {
      ...deps,
      deliver: (c) => enqueueDelivery(queue, c),
      platformStreaming: opts.platformStreaming ?? true,
    },
    chatKey,
  );
}

/** Once the delivery cursor has reached the chat's newest outbox item and no delivery job is left: the items. */
export async function deliveredAll(
  redis: RedisClient,
  prefix: string,
  queue: Queue<DeliveryJob>,
  chatKey: string,
  readOutbox: () => Promise<OutboxItem[]>,
): Promise<OutboxItem[]> {
  const delivery = new DeliveryStore(redis, prefix, 100);
  const items = await waitFor(
    async () => {
      const outbox = await readOutbox();
      const { deliveredTo } = await delivery.state(chatKey);
      return outbox.length > 0 && deliveredTo === outbox.at(-1)!.id ? outbox : undefined;
    },
    { what: `delivery cursor at the newest item of ${chatKey}` },
  );
  await settled(queue);
  return items;
}

/** No delivery job waiting, delayed or running. */
export async function settled(queue: Queue<DeliveryJob>): Promise<void> {
  await waitFor(
    async () => {
      const counts = await queue.getJobCounts('active', 'waiting', 'delayed', 'prioritized');
      return Object.values(counts).every((n) => n === 0);
    },
    { what: 'the delivery queue empty' },
  );
}
