import type { LanguageModel } from 'ai';
import type { Queue, Worker } from 'bullmq';
import { afterAll, afterEach, beforeEach } from 'vitest';
import { createQueue, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { createTurnWorker } from '../../src/worker/turn/turn-worker.js';
import { deletePrefix, randomPrefix, testRedis } from './redis.js';
import { turnDeps } from './turn-deps.js';

export interface TurnsSuite {
  redis: ReturnType<typeof testRedis>;
  /** Fresh per test (beforeEach). */
  prefix: string;
  store: ChatStore;
  turns: Queue<TurnJob>;
  /** A running turn worker on this test's prefix (closed afterEach). */
  startWorker(model: LanguageModel, concurrency?: number): Promise<Worker>;
}

/** One key prefix, store and `turns` queue per test; everything closed and deleted after. */
export function useTurnsSuite(label: string): TurnsSuite {
  const workers: Worker[] = [];
  const suite: TurnsSuite = {
    redis: testRedis(),
    prefix: '',
    store: undefined as unknown as ChatStore,
    turns: undefined as unknown as Queue<TurnJob>,
    async startWorker(model, concurrency = 2) {
      const worker = createTurnWorker(turnDeps(suite.redis, suite.prefix, model), {
        prefix: suite.prefix,
        connection: suite.redis,
        concurrency,
        lockDurationMs: 5000,
        stalledIntervalMs: 5000,
        turns: suite.turns,
      });
      workers.push(worker);
      worker.run().catch(() => undefined);
      await worker.waitUntilReady();
      return worker;
    },
  };
  beforeEach(() => {
    suite.prefix = randomPrefix(label);
    suite.store = new ChatStore(suite.redis, { prefix: suite.prefix, maxEvents: 500 });
    suite.turns = createQueue<TurnJob>(suite.prefix, QUEUES.turns, suite.redis);
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close(true)));
    await suite.turns.close();
    await deletePrefix(suite.redis, suite.prefix);
  });
  afterAll(() => suite.redis.disconnect());
  return suite;
}
