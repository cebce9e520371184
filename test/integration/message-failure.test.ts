import type { Queue, Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { createMetrics, type Metrics } from '../../src/shared/metrics.js';
import { failedMarker } from '../../src/shared/model-view.js';
import { sideServerRoutes } from '../../src/shared/process/side-server.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { failBatch, markFailed } from '../../src/shared/store/failures.js';
import { createModel } from '../../src/worker/agent/model.js';
import { ModelHealth } from '../../src/worker/agent/model-health.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { createTurnWorker } from '../../src/worker/turn/turn-worker.js';
import { textOf, userMessage } from '../helpers/messages.js';
import { sampleValue } from '../helpers/prom.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';
import { turnDeps, withOverflowCompaction } from '../helpers/turn-deps.js';
import { mockModelConfig } from '../helpers/worker-config.js';

const NOTICE = 'Sorry, that one did not go through. Please send it again.';
const limits = { maxPending: 100, dedupWindowMs: 60_000 };
const redis = testRedis();
let mock: Awaited<ReturnType<typeof startMockLlm>>;
let prefix: string;
let metrics: Metrics;
let deps: TurnDeps;
let turns: Queue<TurnJob>;
let worker: Worker<TurnJob> | undefined;

beforeAll(async () => {
  mock = await startMockLlm({ port: 0 });
});
beforeEach(() => {
  prefix = randomPrefix('msgfail');
  mock.state.reset();
  metrics = createMetrics({ defaultMetrics: false });
  // The real HTTP model: the provider's 400s and 401s arrive as real APICallErrors.
  const model = createModel(mockModelConfig(mock.url, 'test-key'));
  deps = {
    ...turnDeps(redis, prefix, model),
    failureNotice: NOTICE,
    modelHealth: new ModelHealth(metrics),
    metrics,
  };
  withOverflowCompaction(deps, model);
  turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
});
afterEach(async () => {
  await worker?.close();
  worker = undefined;
  await turns.close();
  await deletePrefix(redis, prefix);
});
afterAll(async () => {
  await mock.close();
  redis.disconnect();
});

/** A turn worker over `deps` with short model backoffs (the test's outage lasts moments). */
async function startWorker(): Promise<void> {
  worker = createTurnWorker(deps, {
    prefix,
    connection: redis,
    concurrency: 4,
    lockDurationMs: 5000,
    stalledIntervalMs: 5000,
    turns,
    metrics,
    modelBackoff: { baseMs: 20, maxMs: 150 },
  });
  worker.run().catch(() => undefined);
  await worker.waitUntilReady();
}

async function send(store: ChatStore, chatKey: string, id: string, text: string): Promise<void> {
  await store.ingest(chatKey, userMessage(chatKey, id, text), limits);
  await enqueueTurn(turns, chatKey);
}

const outboxTexts = async (chatKey: string) =>
  (await deps.store.readOutbox(chatKey, undefined, 100)).map((o) => o.text);

async function answered(chatKey: string, text: string): Promise<void> {
  await waitFor(async () => (await outboxTexts(chatKey)).some((t) => t.includes(text)), {
    what: `${chatKey}: a reply to '${text}'`,
    timeoutMs: 15_000,
  });
}

describe('a message that cannot be processed', () => {
  it('a message the model always refuses as too long: one notice, the message kept failed in history, nothing pending, the next message answered', async () => {
    await startWorker();
    // Refused as too long whenever it is in the prompt, before and after compaction.
    mock.state.failNext({ contains: 'POISON', count: 1000 });
    await send(deps.store, 'c1', 'm1', 'POISON: a message far too long for the model');
    await waitFor(async () => (await deps.store.pendingCount('c1')) === 0, { what: 'the batch to fail' });

    const outbox = await deps.store.readOutbox('c1', undefined, 10);
    expect(outbox).toEqual([expect.objectContaining({ text: NOTICE, notice: 'failure' })]);
    const [failed] = await deps.store.readHistory('c1');
    expect(failed).toMatchObject({
      id: 'm1',
      metadata: { failed: true, failure: { code: 'CONTEXT_OVERFLOW' } },
    });
    expect(textOf(failed!)).toContain('POISON');
    const events = await deps.store.readEvents('c1', undefined, 100);
    expect(events.filter((e) => e.type === 'turn.overflow')).toHaveLength(1);
    const failures = events.filter((e) => e.type === 'turn.failed');
    expect(failures).toEqual([
      expect.objectContaining({
        data: expect.objectContaining({ reason: 'CONTEXT_OVERFLOW', consumed: 1, notice: outbox[0]!.id }),
      }),
    ]);
    expect(
      sampleValue(await metrics.registry.metrics(), 'chatlane_messages_failed_total', {
        code: 'CONTEXT_OVERFLOW',
      }),
    ).toBe(1);

    await send(deps.store, 'c1', 'm2', 'what is the weather');
    await answered('c1', 'what is the weather');
    expect(await outboxTexts('c1')).toHaveLength(2);
    // The model saw the failed message as its marker, never its content again.
    const last = mock.state.recorded('c1').at(-1)!;
    expect(JSON.stringify(last.messages)).not.toContain('POISON');
    expect(JSON.stringify(last.messages)).toContain(failedMarker('CONTEXT_OVERFLOW').slice(0, 40));
    // The reply is in the outbox before the turn commits.
    const history = await waitFor(async () => {
      const h = await deps.store.readHistory('c1');
      return h.length === 3 ? h : undefined;
    });
    expect(history.map((m) => [m.id, m.metadata.failed ?? false])).toEqual([
      ['m1', true],
      ['m2', false],
      [expect.any(String), false],
    ]);
  });

  it('a provider 400 naming the content fails the batch at once, without a compaction', async () => {
    mock.state.failNext({
      contains: 'BADIMAGE',
      count: 1000,
      status: 400,
      message: 'Invalid image data in message 1',
      code: 'invalid_request_error',
    });
    // A chat with a reply route: the notice is delivered like any reply (its delivery is triggered).
    const route = { channel: 'generic', source: 'crm', url: 'https://crm.example.com/hook' } as const;
    await deps.store.ingest('c2', userMessage('c2', 'b1', 'BADIMAGE here'), limits, route);
    const triggered: string[] = [];
    deps.deliver = async (chatKey) => {
      triggered.push(chatKey);
    };
    const outcome = await runTurn(deps, 'c2');
    expect(triggered).toEqual(['c2']);
    expect(outcome).toMatchObject({ status: 'failed', code: 'CONTENT_REJECTED', failed: 1, pending: 0 });
    expect(await outboxTexts('c2')).toEqual([NOTICE]);
    const types = (await deps.store.readEvents('c2', undefined, 100)).map((e) => e.type);
    expect(types).not.toContain('turn.overflow');
    expect((await deps.store.readHistory('c2'))[0]?.metadata.failure?.code).toBe('CONTENT_REJECTED');
  });

  it('a turn failing on the same messages is retried, and fails the batch only on its last attempt', async () => {
    const { model } = scriptedModel(() => {
      throw new Error('tool loop crashed');
    });
    const local = { ...deps, model };
    await deps.store.ingest('c3', userMessage('c3', 't1', 'hello'), limits);
    await expect(runTurn(local, 'c3')).rejects.toThrow('tool loop crashed');
    expect(await deps.store.pendingCount('c3')).toBe(1);
    expect(await outboxTexts('c3')).toEqual([]);

    const outcome = await runTurn(local, 'c3', { finalAttempt: true });
    expect(outcome).toMatchObject({ status: 'failed', code: 'TURN_FAILED' });
    expect(await deps.store.pendingCount('c3')).toBe(0);
    expect(await outboxTexts('c3')).toEqual([NOTICE]);
  });

  it('writes the notice once per batch: a retry of a failed batch, or a stale turn, writes nothing', async () => {
    await deps.store.ingest('c4', userMessage('c4', 'x1', 'one'), limits);
    const [entry] = await deps.store.readInbox('c4', 10);
    const lease = await deps.store.acquire('c4', 'w', 5000);
    if (!lease.ok) throw new Error('busy');
    const batch = {
      runId: 'r1',
      consumed: [entry!.streamId],
      messages: [markFailed(entry!.message, 'TURN_FAILED', 'boom')],
      notice: NOTICE,
      ts: Date.now(),
      code: 'TURN_FAILED' as const,
      event: {},
    };
    // A stale fence (a turn that lost the chat) writes nothing.
    expect(await failBatch(deps.store, 'c4', '0', batch)).toMatchObject({ ok: false, reason: 'fenced-out' });
    expect(await outboxTexts('c4')).toEqual([]);
    expect(await failBatch(deps.store, 'c4', lease.fence, batch)).toMatchObject({ ok: true });
    // The same batch again (an attempt that crashed after the script and was retried).
    expect(await failBatch(deps.store, 'c4', lease.fence, batch)).toMatchObject({
      ok: false,
      reason: 'missing',
    });
    expect(await outboxTexts('c4')).toEqual([NOTICE]);
    expect((await deps.store.readHistory('c4')).map((m: ChatMessage) => m.id)).toEqual(['x1']);
  });
});

describe('a model that is unreachable or refuses our credentials', () => {
  it('401 for a while: nobody is told, nothing is lost, /readyz names the model as failing, and every message is answered after recovery', async () => {
    const side = sideServerRoutes({
      metrics,
      redis,
      isRunning: () => true,
      logger: silentLogger(),
      detail: () => ({ model: deps.modelHealth!.status() }),
    });
    await startWorker();
    mock.state.failNext({
      count: 100_000,
      status: 401,
      message: 'Incorrect API key provided',
      code: 'invalid_api_key',
    });
    const chats = ['a', 'b', 'c'];
    for (const chatKey of chats) {
      await send(deps.store, chatKey, `${chatKey}1`, `${chatKey} first`);
      await send(deps.store, chatKey, `${chatKey}2`, `${chatKey} second`);
    }
    // More refused calls per chat than a turn job has attempts (5): still nothing failed.
    await Promise.all(chats.map((c) => mock.state.waitForRequest(c, 7)));
    const ready = await side('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toMatchObject({
      status: 'ready',
      model: { status: 'failing', kind: 'auth' },
    });
    for (const chatKey of chats) {
      expect(await deps.store.pendingCount(chatKey)).toBe(2);
      expect(await outboxTexts(chatKey)).toEqual([]);
    }
    expect(await turns.getFailedCount()).toBe(0);
    const text = await metrics.registry.metrics();
    expect(sampleValue(text, 'chatlane_model_errors_total', { kind: 'auth' })).toBeGreaterThanOrEqual(21);

    mock.state.reset(); // The key is fixed.
    for (const chatKey of chats) await answered(chatKey, `${chatKey} second`);
    for (const chatKey of chats) {
      // Replies reach the outbox before their turn commits.
      await waitFor(async () => (await deps.store.pendingCount(chatKey)) === 0, {
        what: `${chatKey} committed`,
      });
      const history = await deps.store.readHistory(chatKey);
      expect(history.filter((m) => m.role === 'user').map((m) => m.id)).toEqual([
        `${chatKey}1`,
        `${chatKey}2`,
      ]);
      expect(history.some((m) => m.metadata.failed)).toBe(false);
      expect((await outboxTexts(chatKey)).filter((t) => t === NOTICE)).toEqual([]);
    }
    expect(await turns.getFailedCount()).toBe(0);
    expect(JSON.parse((await side('GET', '/readyz')).body)).toMatchObject({
      model: { status: 'ok' },
    });
  });
});
