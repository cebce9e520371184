import type { Queue, Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import { createMetrics, type Metrics } from '../../src/shared/metrics.js';
import {
  type SideServerHandle,
  sideServerRoutes,
  startSideServer,
} from '../../src/shared/process/side-server.js';
import { waitReady } from '../../src/shared/redis.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { meteredModel } from '../../src/worker/agent/model-metrics.js';
import { createTurnWorker } from '../../src/worker/turn/turn-worker.js';
import { userMessage } from '../helpers/messages.js';
import { sampleValue } from '../helpers/prom.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';

const redis = testRedis();
const limits = { maxPending: 100, dedupWindowMs: 60_000 };
let prefix: string;
let metrics: Metrics;
let turns: Queue<TurnJob>;
let worker: Worker<TurnJob>;
let store: ChatStore;
let side: SideServerHandle;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('side');
  metrics = createMetrics();
  turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
  // The scripted model reports 10 input and 5 output tokens per call.
  const { model } = scriptedModel();
  const deps = turnDeps(redis, prefix, meteredModel(model, metrics));
  store = deps.store;
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
  side = await startSideServer({
    host: '127.0.0.1',
    port: 0,
    metrics,
    redis,
    isRunning: () => worker.isRunning() && !worker.closing,
    queues: [turns],
    logger: silentLogger(),
  });
});
afterEach(async () => {
  await side.close();
  await worker.close();
  await turns.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const get = (path: string) => fetch(`${side.url}${path}`);

describe('worker side server', () => {
  it('answers /healthz 200 and /readyz 200 while the worker runs, /readyz 503 once it is closed', async () => {
    expect((await get('/healthz')).status).toBe(200);
    const ready = await get('/readyz');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready' });

    await worker.close();
    const closed = await get('/readyz');
    expect(closed.status).toBe(503);
    expect(await closed.json()).toMatchObject({ status: 'not ready', reason: 'worker is not running' });
    // Still alive, just not ready.
    expect((await get('/healthz')).status).toBe(200);
  });

  it('after a turn, /metrics has the turn duration, queue wait, model latency and tokens, and turns queue depth', async () => {
    const before = await (await get('/metrics')).text();
    expect(sampleValue(before, 'chatlane_turn_duration_seconds_count', { outcome: 'done' })).toBeUndefined();

    await store.ingest('alice', userMessage('alice', 'a1', 'hello'), limits);
    await enqueueTurn(turns, 'alice');
    await waitFor(async () => (await store.readHistory('alice')).length === 2, { what: 'the turn' });

    const res = await waitFor(
      async () => {
        const text = await (await get('/metrics')).text();
        return sampleValue(text, 'chatlane_turn_duration_seconds_count', { outcome: 'done' }) === 1 && text;
      },
      { what: 'the turn duration observation' },
    );
    expect(sampleValue(res, 'chatlane_queue_wait_seconds_count', { queue: 'turns' })).toBe(1);
    // The echo script answers in two model calls: chat_send, then an empty final step.
    expect(sampleValue(res, 'chatlane_model_call_duration_seconds_count', { result: 'ok' })).toBe(2);
    expect(sampleValue(res, 'chatlane_model_tokens_total', { kind: 'input' })).toBe(20);
    expect(sampleValue(res, 'chatlane_model_tokens_total', { kind: 'output' })).toBe(10);
    expect(sampleValue(res, 'chatlane_fence_rejections_total')).toBe(0);
    expect(sampleValue(res, 'bullmq_job_count', { queue: 'turns', state: 'waiting' })).toBe(0);
    expect(sampleValue(res, 'process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('counts a turn with nothing pending as idle', async () => {
    await enqueueTurn(turns, 'nobody');
    const text = await waitFor(
      async () => {
        const t = await (await get('/metrics')).text();
        return sampleValue(t, 'chatlane_turn_duration_seconds_count', { outcome: 'idle' }) === 1 && t;
      },
      { what: 'the idle turn' },
    );
    expect(sampleValue(text, 'chatlane_turn_duration_seconds_count', { outcome: 'done' })).toBeUndefined();
  });

  it('closes idempotently and frees its port', async () => {
    await Promise.all([side.close(), side.close()]);
    await expect(get('/healthz')).rejects.toThrow();
  });
});

describe('readiness needs Redis', () => {
  it('answers /readyz 503 naming Redis when the ping fails, even with the worker running', async () => {
    const answer = sideServerRoutes({
      metrics: createMetrics({ defaultMetrics: false }),
      redis: { ping: () => Promise.reject(new Error('connection refused')) },
      isRunning: () => true,
      logger: silentLogger(),
    });
    const res = await answer('GET', '/readyz');
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body).reason).toMatch(/redis is not reachable: connection refused/);
  });

  it('refuses a METRICS_PORT that is already taken, naming the variable', async () => {
    const port = Number(new URL(side.url).port);
    await expect(
      startSideServer({
        host: '127.0.0.1',
        port,
        metrics,
        redis,
        isRunning: () => true,
        logger: silentLogger(),
      }),
    ).rejects.toThrow(/METRICS_PORT: \d+ is already in use/);
  });
});

describe('METRICS_PORT unset', () => {
  const base = {
    host: '127.0.0.1',
    port: undefined,
    metrics: createMetrics({ defaultMetrics: false }),
    redis: { ping: async () => 'PONG' },
    isRunning: () => true,
    logger: silentLogger(),
  };

  it('takes the default port when it is free, and any free port when it is taken', async () => {
    // A port known to be free a moment ago stands in for 9100, which the host may be using.
    const probe = await startSideServer({ ...base, port: 0 });
    const preferred = Number(new URL(probe.url).port);
    await probe.close();

    const first = await startSideServer({ ...base, defaultPort: preferred });
    const second = await startSideServer({ ...base, defaultPort: preferred });
    try {
      expect(Number(new URL(first.url).port)).toBe(preferred);
      const fallback = Number(new URL(second.url).port);
      expect(fallback).not.toBe(preferred);
      expect(fallback).toBeGreaterThan(0);
      expect((await fetch(`${second.url}/healthz`)).status).toBe(200);
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });
});

describe('METRICS_TOKEN on the side port', () => {
  const TOKEN = 'a-metrics-token-of-at-least-32-chars';

  it('set, /metrics answers only Authorization: Bearer <METRICS_TOKEN>; the probes stay open', async () => {
    const guarded = await startSideServer({
      host: '127.0.0.1',
      port: 0,
      metrics: createMetrics({ defaultMetrics: false }),
      redis: { ping: async () => 'PONG' },
      isRunning: () => true,
      logger: silentLogger(),
      metricsToken: TOKEN,
    });
    try {
      const scrape = (authorization?: string) =>
        fetch(`${guarded.url}/metrics`, authorization ? { headers: { authorization } } : {});
      const missing = await scrape();
      expect(missing.status).toBe(401);
      expect(await missing.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
      expect((await scrape(`Bearer ${TOKEN}x`)).status).toBe(401);
      const ok = await scrape(`Bearer ${TOKEN}`);
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('chatlane_');
      expect((await fetch(`${guarded.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${guarded.url}/readyz`)).status).toBe(200);
    } finally {
      await guarded.close();
    }
  });

  it('unset, /metrics is open (the side port is internal)', async () => {
    expect((await get('/metrics')).status).toBe(200);
  });
});
