import type { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { createQueue, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { SWEEPER_SCHEDULER_ID } from '../../src/worker/upkeep/sweeper.js';
import { userMessage } from '../helpers/messages.js';
import { type RoleProcess, startRole } from '../helpers/processes.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

const SWEEP_MS = 1000;
const limits = { maxPending: 100, dedupWindowMs: 60_000 };

describe('the sweeper in a running worker', () => {
  const redis = testRedis();
  const prefix = randomPrefix('e2e-sweep');
  const store = new ChatStore(redis, { prefix, maxEvents: 1000 });
  let turns: Queue<TurnJob>;
  let mock: Awaited<ReturnType<typeof startMockLlm>>;
  let worker: RoleProcess | undefined;

  beforeAll(async () => {
    mock = await startMockLlm({ port: 0, latencyMs: [1, 5] });
    turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
    worker = await startRole('worker', {
      CHATLANE_PREFIX: prefix,
      LLM_BASE_URL: mock.url,
      LLM_MODEL: 'mock',
      SWEEP_INTERVAL_MS: String(SWEEP_MS),
    });
  }, 60_000);

  afterAll(async () => {
    await worker?.kill('SIGKILL');
    await mock?.close();
    await turns?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  /** Stored and indexed but never enqueued: the ingress died between ingest and enqueue. */
  async function strand(chatKey: string, text: string): Promise<number> {
    await store.ingest(chatKey, userMessage(chatKey, `${chatKey}-1`, text), limits);
    await store.touchChat(chatKey);
    return Date.now();
  }

  const requeuedAt = async (chatKey: string) =>
    (await store.readEvents(chatKey, undefined, 100)).find((e) => e.type === 'sweep.requeued')?.ts;

  it('registers one fleet-wide scheduler at the configured interval', async () => {
    const maintenance = createQueue(prefix, QUEUES.maintenance, redis);
    try {
      const schedulers = await maintenance.getJobSchedulers();
      expect(schedulers).toHaveLength(1);
      expect(schedulers[0]).toMatchObject({ key: SWEEPER_SCHEDULER_ID, every: SWEEP_MS });
    } finally {
      await maintenance.close();
    }
  });

  it('answers a chat whose job never existed within one sweep interval', async () => {
    const stored = await strand('sw-lost', 'is anyone there?');
    expect(await turns.getDeduplicationJobId('sw-lost')).toBeNull();

    const at = await waitFor(() => requeuedAt('sw-lost'), { timeoutMs: 5000, what: 'sweep.requeued' });
    // Redis stamps the event; allow for clock rounding and the delayed sweep job's promotion.
    expect(at - stored).toBeLessThanOrEqual(SWEEP_MS + 500);
    await waitFor(async () => (await store.pendingCount('sw-lost')) === 0, { what: 'the turn' });
    const history = await store.readHistory('sw-lost');
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect((await store.readOutbox('sw-lost', undefined, 10)).length).toBeGreaterThan(0);
  });

  it('leaves a chat alone while a live owner holds its lease, and takes it once the lease expired', async () => {
    await store.acquire('sw-held', 'elsewhere:live', 3 * SWEEP_MS + 500);
    await strand('sw-held', 'wait for me');
    await new Promise((r) => setTimeout(r, 2.5 * SWEEP_MS));
    // At least two sweeps ran: the lease is live, so nothing was enqueued or sent to the model.
    expect(await requeuedAt('sw-held')).toBeUndefined();
    expect(await turns.getDeduplicationJobId('sw-held')).toBeNull();
    expect(mock.state.perChat['sw-held']).toBeUndefined();

    // The owner never finishes: once its lease runs out the sweeper re-enqueues the chat.
    await waitFor(async () => (await store.pendingCount('sw-held')) === 0, {
      timeoutMs: 10_000,
      what: 'the chat to be answered after the lease expired',
    });
    const types = (await store.readEvents('sw-held', undefined, 100)).map((e) => e.type);
    expect(types).toContain('sweep.requeued');
    expect(types).toContain('lease.takeover');
    expect((await store.readHistory('sw-held')).map((m) => m.role)).toEqual(['user', 'assistant']);
  }, 30_000);
});
