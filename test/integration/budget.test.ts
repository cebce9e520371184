import type { Queue, Worker } from 'bullmq';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { createMetrics, type Metrics } from '../../src/shared/metrics.js';
import { DAY_MS } from '../../src/shared/retention.js';
import { checkBudget } from '../../src/shared/store/budget.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { utcDay } from '../../src/shared/usage.js';
import type { TurnDeps } from '../../src/worker/turn/turn.js';
import { createTurnWorker } from '../../src/worker/turn/turn-worker.js';
import { textOf, userMessage } from '../helpers/messages.js';
import { sampleValue } from '../helpers/prom.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { newUserTexts, promptTranscript, scriptedModel } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';

const NOTICE = 'Daily limit reached; your messages are saved.';
const limits = { maxPending: 100, dedupWindowMs: 60_000 };
const redis = testRedis();
let prefix: string;
let turns: Queue<TurnJob>;
let worker: Worker<TurnJob> | undefined;
let metrics: Metrics;
/** The store's clock: the test moves it to the next UTC day. */
let now = Date.UTC(2026, 10, 26, 12);

beforeEach(() => {
  prefix = randomPrefix('budget');
  now = Date.UTC(2026, 10, 26, 12);
  metrics = createMetrics({ defaultMetrics: false });
  turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
});
afterEach(async () => {
  await worker?.close();
  worker = undefined;
  await turns.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

async function startWorker(deps: TurnDeps): Promise<void> {
  worker = createTurnWorker(deps, {
    prefix,
    connection: redis,
    concurrency: 2,
    lockDurationMs: 5000,
    stalledIntervalMs: 5000,
    turns,
    metrics,
  });
  worker.run().catch(() => undefined);
  await worker.waitUntilReady();
}

describe('CHAT_DAILY_TOKEN_BUDGET', () => {
  it('a chat over its budget gets one notice a day and no model call; its messages wait in history for the next day', async () => {
    // Every echo turn is two model calls of 10 input + 5 output tokens: 30 tokens a turn.
    const model = scriptedModel();
    const deps: TurnDeps = {
      ...turnDeps(redis, prefix, model.model, {}, { now: () => now }),
      budget: { dailyTokens: 40, notice: NOTICE },
    };
    const { store } = deps;
    await startWorker(deps);
    const send = async (id: string, text: string) => {
      await store.ingest('c1', userMessage('c1', id, text), limits);
      await enqueueTurn(turns, 'c1');
    };
    const outbox = async () => (await store.readOutbox('c1', undefined, 100)).map((o) => o.text);
    const settled = (n: number) =>
      waitFor(
        async () => (await store.pendingCount('c1')) === 0 && (await store.readHistory('c1')).length >= n,
        {
          what: `${n} messages in history`,
        },
      );

    await send('m1', 'first');
    await settled(2);
    await send('m2', 'second');
    await settled(4);
    expect(model.calls()).toBe(4);
    const day = utcDay(now);
    expect(await redis.hget(store.keys('c1').usage, `${day}|total`)).toBe('60');

    // 60 tokens used, budget 40: held, with the notice, and no model call.
    await send('m3', 'third');
    await settled(5);
    await send('m4', 'fourth');
    await settled(6);
    expect(model.calls()).toBe(4);
    expect(await outbox()).toEqual(['echo: first', 'echo: second', NOTICE]);
    const items = await store.readOutbox('c1', undefined, 100);
    expect(items.at(-1)).toMatchObject({ notice: 'budget' });
    const history = await store.readHistory('c1');
    expect(history.slice(-2).map(textOf)).toEqual(['third', 'fourth']);
    const held = (await store.readEvents('c1', undefined, 100)).filter((e) => e.type === 'budget.exceeded');
    expect(held.map((e) => [e.data.consumed, e.data.used, e.data.budget, e.data.notice !== ''])).toEqual([
      [1, 60, 40, true],
      [1, 60, 40, false],
    ]);
    expect(
      sampleValue(await metrics.registry.metrics(), 'chatlane_turn_duration_seconds_count', {
        outcome: 'held',
      }),
    ).toBe(2);

    // The next UTC day: the chat is answered again, and the model reads what waited.
    now += DAY_MS;
    await send('m5', 'fifth');
    // The echo answers every user message after its last reply: the held ones too.
    await waitFor(async () => (await outbox()).includes('echo: third | fourth | fifth'), {
      what: 'the next day reply',
    });
    // chat_send reaches the outbox mid-turn; the turn's second model call and its usage come
    // after it, with the commit.
    await settled(8);
    expect(model.calls()).toBe(6);
    const transcript = promptTranscript(model.prompts[4]!);
    expect(transcript).toEqual(expect.arrayContaining(['user: third', 'user: fourth', 'user: fifth']));
    expect(newUserTexts(model.prompts[4]!)).toEqual(['third', 'fourth', 'fifth']);
    expect(await redis.hget(store.keys('c1').usage, `${utcDay(now)}|total`)).toBe('30');
  });

  it('a stale turn holds nothing, and a held batch retried writes no second notice', async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 100, now: () => now });
    await redis.hset(store.keys('c3').usage, `${utcDay(now)}|total`, 500);
    await store.ingest('c3', userMessage('c3', 'h1', 'hello'), limits);
    const [entry] = await store.readInbox('c3', 10);
    const lease = await store.acquire('c3', 'w', 5000);
    if (!lease.ok) throw new Error('busy');
    const check = {
      runId: 'r1',
      consumed: [entry!.streamId],
      messages: [entry!.message],
      notice: NOTICE,
      dailyTokens: 100,
    };
    expect(await checkBudget(store, 'c3', '0', check)).toMatchObject({ ok: false, reason: 'fenced-out' });
    expect(await store.pendingCount('c3')).toBe(1);
    expect(await checkBudget(store, 'c3', lease.fence, { ...check, dailyTokens: 501 })).toMatchObject({
      ok: true,
      status: 'under',
      used: 500,
    });
    expect(await store.pendingCount('c3')).toBe(1);
    expect(await checkBudget(store, 'c3', lease.fence, check)).toMatchObject({ ok: true, status: 'held' });
    expect(await checkBudget(store, 'c3', lease.fence, check)).toMatchObject({
      ok: false,
      reason: 'missing',
    });
    expect((await store.readOutbox('c3', undefined, 10)).map((o) => o.text)).toEqual([NOTICE]);
    expect((await store.readHistory('c3')).map((m) => m.id)).toEqual(['h1']);
  });

  it('without a budget a chat is never held', async () => {
    const model = scriptedModel();
    const deps = turnDeps(redis, prefix, model.model, {}, { now: () => now });
    await redis.hset(deps.store.keys('c2').usage, `${utcDay(now)}|total`, 10_000_000);
    await startWorker(deps);
    await deps.store.ingest('c2', userMessage('c2', 'x', 'hello'), limits);
    await enqueueTurn(turns, 'c2');
    await waitFor(async () => (await deps.store.readOutbox('c2', undefined, 10)).length === 1, {
      what: 'the reply',
    });
    // The reply is in the outbox before the turn's second model call; the commit comes after.
    await waitFor(async () => (await deps.store.readHistory('c2')).length === 2, { what: 'the commit' });
    expect(model.calls()).toBe(2);
  });
});
