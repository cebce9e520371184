import type { Queue } from 'bullmq';
import { beforeEach, describe, expect, it } from 'vitest';
import { createQueue, type DeliveryJob, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { sweepChat, sweepCursorKey, sweepOnce } from '../../src/worker/upkeep/sweeper.js';
import { userMessage } from '../helpers/messages.js';
import { waitFor } from '../helpers/redis.js';
import { echoScript, scriptedModel } from '../helpers/scripted-model.js';
import { useTurnsSuite } from '../helpers/turns-suite.js';

const suite = useTurnsSuite('sweep');
const { redis } = suite;
const limits = { maxPending: 1000, dedupWindowMs: 60_000 };
let prefix: string;
let store: ChatStore;
let turns: Queue<TurnJob>;

beforeEach(() => {
  ({ prefix, store, turns } = suite);
});

/** A message stored and indexed, as after a 202 whose job was then lost. */
async function strand(chatKey: string, text = 'hello', at = Date.now()): Promise<void> {
  const res = await store.ingest(chatKey, userMessage(chatKey, `${chatKey}-${text}`, text), limits);
  expect(res.status).toBe('accepted');
  await store.touchChat(chatKey, at);
}

async function jobOf(chatKey: string): Promise<{ id: string; state: string } | undefined> {
  const id = await turns.getDeduplicationJobId(chatKey);
  return id ? { id, state: await turns.getJobState(id) } : undefined;
}

const deps = () => ({ store, turns, batch: 1000, logger: silentLogger() });

describe('sweep-check.lua', () => {
  it('reports pending messages and the lease by the Redis clock', async () => {
    expect(await store.sweepCheck('fresh')).toEqual({
      lease: 'free',
      pending: 0,
      leaseMs: 0,
      undelivered: false,
      relays: 0,
    });
    await strand('c1');
    await store.acquire('c1', 'someone', 60_000);
    const live = await store.sweepCheck('c1');
    expect(live).toMatchObject({ lease: 'live', pending: 1 });
    expect(live.leaseMs).toBeGreaterThan(55_000);

    await store.acquire('c2', 'someone', 100);
    await new Promise((r) => setTimeout(r, 250));
    const expired = await store.sweepCheck('c2');
    expect(expired).toMatchObject({ lease: 'expired', pending: 0 });
    expect(expired.leaseMs).toBeGreaterThanOrEqual(100);
  });
});

describe('sweepChat and deliveries', () => {
  it('re-adds the delivery of a routed chat whose outbox is ahead of its cursor and has no job, once', async () => {
    const deliveries = createQueue<DeliveryJob>(prefix, QUEUES.deliveries, redis);
    try {
      const route = { channel: 'test', threadId: 't' };
      await store.ingest('routed', userMessage('routed', 'r1', 'hi'), limits, route);
      const lease = await store.acquire('routed', 'turn', 60_000);
      if (!lease.ok) throw new Error('busy');
      // Written, but the process died before it could trigger the delivery.
      expect(
        await store.sendOutbox('routed', lease.fence, { runId: 'r', text: 'reply', ts: 1 }),
      ).toMatchObject({
        ok: true,
        routed: true,
      });
      expect((await store.sweepCheck('routed')).undelivered).toBe(true);
      const sweepDeps = { ...deps(), deliveries };
      await sweepChat(sweepDeps, 'routed');
      const jobId = await deliveries.getDeduplicationJobId('routed');
      expect(jobId && (await deliveries.getJobState(jobId))).toBe('waiting');
      await sweepChat(sweepDeps, 'routed');
      expect(await deliveries.getWaitingCount()).toBe(1);
      expect((await store.readEvents('routed', undefined, 10)).map((e) => e.type)).toEqual([
        'sweep.delivery-requeued',
      ]);

      // A chat without a route is never delivered: nothing to re-add.
      const api = await store.acquire('api-only', 'turn', 60_000);
      if (!api.ok) throw new Error('busy');
      await store.sendOutbox('api-only', api.fence, { runId: 'r', text: 'reply', ts: 1 });
      expect((await store.sweepCheck('api-only')).undelivered).toBe(false);
    } finally {
      await deliveries.close();
    }
  });
});

describe('sweepChat', () => {
  it('re-enqueues a chat with pending messages and no job, once', async () => {
    await strand('lost');
    expect(await jobOf('lost')).toBeUndefined();
    expect(await sweepChat(deps(), 'lost')).toBe('requeued');
    expect(await jobOf('lost')).toMatchObject({ state: 'waiting' });
    const events = await store.readEvents('lost', undefined, 10);
    expect(events.map((e) => e.type)).toEqual(['sweep.requeued']);
    expect(events[0]!.data).toMatchObject({ pending: 1, lease: 'free', staleJobId: null });

    // The job now waits: a second sweep leaves it alone.
    expect(await sweepChat(deps(), 'lost')).toBe('queued');
    expect(await turns.getWaitingCount()).toBe(1);
  });

  it('leaves a chat alone while a live owner holds its lease', async () => {
    await strand('busy');
    expect(await store.acquire('busy', 'live-owner', 60_000)).toMatchObject({ ok: true });
    expect(await sweepChat(deps(), 'busy')).toBe('leased');
    expect(await jobOf('busy')).toBeUndefined();
    expect(await turns.count()).toBe(0);
  });

  it('re-enqueues a chat whose lease expired without a finish and that has no job', async () => {
    await strand('stale');
    await store.acquire('stale', 'dead-owner', 100);
    await new Promise((r) => setTimeout(r, 250));
    expect(await sweepChat(deps(), 'stale')).toBe('requeued');
    expect(await jobOf('stale')).toMatchObject({ state: 'waiting' });
    const [event] = await store.readEvents('stale', undefined, 10);
    expect(event?.data).toMatchObject({ lease: 'expired' });
  });

  it('leaves a chat alone when its job is delayed (waiting out a lease), and ignores chats with nothing pending', async () => {
    await strand('delayed');
    await turns.add('turn', { chatKey: 'delayed' }, { deduplication: { id: 'delayed' }, delay: 60_000 });
    expect(await sweepChat(deps(), 'delayed')).toBe('queued');
    expect(await turns.getDelayedCount()).toBe(1);
    expect(await turns.getWaitingCount()).toBe(0);

    await store.touchChat('quiet');
    expect(await sweepChat(deps(), 'quiet')).toBe('idle');
    expect(await jobOf('quiet')).toBeUndefined();
    expect(await turns.count()).toBe(1);
  });

  it('a spurious re-add while the job is waiting is dropped by deduplication', async () => {
    await strand('racy');
    await enqueueTurn(turns, 'racy');
    await enqueueTurn(turns, 'racy');
    expect(await turns.getWaitingCount()).toBe(1);
  });
});

describe('sweepOnce', () => {
  it('walks a large index in bounded pages: the newest half-batch every time, the rest by a persisted cursor', async () => {
    const t0 = Date.now() - 100_000;
    const chats = Array.from({ length: 10 }, (_, i) => `page-${i}`);
    // page-9 is the most recently active.
    for (const [i, c] of chats.entries()) await strand(c, 'hi', t0 + i * 1000);
    const newestFirst = [...chats].reverse();

    const first = await sweepOnce({ ...deps(), batch: 4 });
    expect(first).toMatchObject({ indexed: 10, checked: 4, requeuedCount: 4, cursor: 4 });
    expect(new Set(first.requeued)).toEqual(new Set(newestFirst.slice(0, 4)));
    expect(await redis.get(sweepCursorKey(prefix))).toBe('4');

    const seen = new Set(first.requeued);
    for (let i = 0; i < 3; i++) {
      const r = await sweepOnce({ ...deps(), batch: 4 });
      expect(r.checked).toBe(4);
      for (const c of r.requeued) seen.add(c);
    }
    expect(seen).toEqual(new Set(chats));
    // The walk wrapped around to just after the newest half-batch.
    expect(await redis.get(sweepCursorKey(prefix))).toBe('2');
    expect(await turns.getWaitingCount()).toBe(10);
  });

  it('checks every chat each sweep while the index fits in a batch', async () => {
    await strand('a');
    await strand('b');
    await store.touchChat('c');
    const r = await sweepOnce(deps());
    expect(r).toMatchObject({ indexed: 3, checked: 3, idle: 1, requeuedCount: 2 });
    expect(new Set(r.requeued)).toEqual(new Set(['a', 'b']));
  });
});

describe('a turn that failed for good on infrastructure', () => {
  it('keeps its pending messages; the sweeper re-enqueues the chat, even one missing from the index', async () => {
    let failing = true;
    const { model } = scriptedModel((prompt, call, options) => {
      // Redis trouble, not the model's or the message's: the attempts run out, the messages stay.
      if (failing) throw new Error('Connection is closed.');
      return echoScript(prompt, call, options);
    });
    await suite.startWorker(model);

    // Not touched: only the failed-jobs source can find this chat.
    await store.ingest('doomed', userMessage('doomed', 'doomed-1', 'anyone there?'), limits);
    await enqueueTurn(turns, 'doomed');

    // Between attempts the job is delayed (backoff): the sweeper must not add another.
    await waitFor(async () => (await jobOf('doomed'))?.state === 'delayed', { what: 'first retry backoff' });
    expect((await sweepOnce(deps())).requeuedCount).toBe(0);

    // 5 attempts, backoff 1+2+4+8 s.
    const failedId = await waitFor(
      async () => {
        const failed = await turns.getFailed();
        return failed.find((j) => j.data.chatKey === 'doomed')?.id;
      },
      { timeoutMs: 40_000, intervalMs: 250, what: 'the job to fail for good' },
    );
    expect(await store.pendingCount('doomed')).toBe(1);
    expect(await jobOf('doomed')).toBeUndefined();

    failing = false;
    const report = await sweepOnce(deps());
    expect(report.requeued).toEqual(['doomed']);
    const [event] = (await store.readEvents('doomed', undefined, 100)).filter(
      (e) => e.type === 'sweep.requeued',
    );
    expect(event?.data).toMatchObject({ pending: 1, lease: 'free' });

    await waitFor(async () => (await store.pendingCount('doomed')) === 0, { what: 'the re-enqueued turn' });
    const history = await store.readHistory('doomed');
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(failedId).toBeDefined();
  }, 60_000);
});
