import type { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { startWorker, type WorkerHandle } from '../../src/roles/worker.js';
import { loadConfig } from '../../src/shared/config.js';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { userMessage } from '../helpers/messages.js';
import { deletePrefix, REDIS_ENV, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

describe('TURNS_GLOBAL_CONCURRENCY', () => {
  const redis = testRedis();
  const prefix = randomPrefix('gconc');
  const store = new ChatStore(redis, { prefix, maxEvents: 500 });
  let turns: Queue<TurnJob>;
  let mock: Awaited<ReturnType<typeof startMockLlm>>;
  const handles: WorkerHandle[] = [];

  const config = (extra: Record<string, string>) =>
    loadConfig({
      ...REDIS_ENV,
      CHATLANE_PREFIX: prefix,
      LLM_BASE_URL: mock.url,
      LLM_MODEL: 'mock',
      HOST: '127.0.0.1',
      METRICS_PORT: '0',
      WORKER_CONCURRENCY: '4',
      SHUTDOWN_GRACE_MS: '2000',
      ...extra,
    });

  async function start(extra: Record<string, string>): Promise<WorkerHandle> {
    const handle = await startWorker(config(extra), silentLogger());
    handles.push(handle);
    return handle;
  }

  beforeAll(async () => {
    mock = await startMockLlm({ port: 0, latencyMs: [1, 5] });
    turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
  });

  afterAll(async () => {
    mock?.state.releaseAll();
    await Promise.all(handles.map((h) => h.close()));
    await mock?.close();
    await turns?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('is applied at startup and caps running turns across workers', async () => {
    expect(await turns.getGlobalConcurrency()).toBeNull();
    await start({ TURNS_GLOBAL_CONCURRENCY: '2' });
    expect(await turns.getGlobalConcurrency()).toBe(2);
    // A second worker without the variable leaves the fleet's cap alone.
    await start({});
    expect(await turns.getGlobalConcurrency()).toBe(2);

    // Two workers of 4 could run 8 turns; the cap lets 2 reach the model.
    const chats = Array.from({ length: 6 }, (_, i) => `gc-${i}`);
    for (const c of chats) {
      mock.state.hold(c);
      await store.ingest(c, userMessage(c, `${c}-1`, 'hi'), { maxPending: 10, dedupWindowMs: 60_000 });
      await enqueueTurn(turns, c);
    }
    await waitFor(async () => mock.state.inFlight === 2, { what: 'two turns at the model' });
    await new Promise((r) => setTimeout(r, 500));
    expect(mock.state.inFlight).toBe(2);
    expect(await turns.getActiveCount()).toBe(2);

    mock.state.releaseAll();
    await waitFor(
      async () => {
        for (const c of chats) if ((await store.pendingCount(c)) > 0) return false;
        return true;
      },
      { what: 'every chat answered' },
    );
  });

  it('0 removes the cap', async () => {
    await start({ TURNS_GLOBAL_CONCURRENCY: '0' });
    expect(await turns.getGlobalConcurrency()).toBeNull();
  });
});
