import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../bench/lib/util.js';
import { type OwnRedis, ownRedis } from '../../scripts/chaos/redis-server.js';
import { REDIS_UNAVAILABLE_MESSAGE } from '../../src/ingress/validation.js';
import type { TurnJob } from '../../src/shared/jobs.js';
import { closeRedis, createRedisClient, type RedisClient, waitReady } from '../../src/shared/redis.js';
import { createTurnWorker } from '../../src/worker/turn/turn-worker.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { waitFor } from '../helpers/redis.js';
import { echoScript, scriptedModel, systemText } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';

/**
 * A hung Redis (SIGSTOP: the socket stays open, nothing answers). Its own redis-server on a
 * free port — the shared one is never paused. The ingress gives up on a command after
 * REDIS_COMMAND_TIMEOUT_MS and answers 503, then serves again by itself once Redis answers;
 * a worker waits: it starts no turn while Redis hangs, and the turn it was running keeps its
 * lease and commits under its own fence.
 */

const COMMAND_TIMEOUT_MS = 500;
let server: OwnRedis;
let dir: string;
const clients: RedisClient[] = [];

const pause = () => process.kill(server.pid()!, 'SIGSTOP');
const resume = () => process.kill(server.pid()!, 'SIGCONT');

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chatlane-hung-'));
  server = ownRedis(dir, await freePort());
  await server.start();
});
afterAll(async () => {
  if (server.pid()) resume();
  await Promise.all(clients.map((c) => closeRedis(c)));
  await server.stop('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function connect(role: 'ingress' | 'worker'): RedisClient {
  const client = createRedisClient(
    { REDIS_URL: server.url, REDIS_CLUSTER_NODES: undefined, REDIS_COMMAND_TIMEOUT_MS: COMMAND_TIMEOUT_MS },
    role,
  );
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

const post = (ing: TestIngress, chatKey: string, id: string, text = id) =>
  ing.app.inject({ method: 'POST', url: `/v1/chats/${chatKey}/messages`, payload: { id, text } });

describe('the ingress with Redis hung', () => {
  it('answers 503 REDIS_UNAVAILABLE within about a second, recovers by itself, and a retry of a 503 is stored once', async () => {
    const redis = connect('ingress');
    await waitReady(redis);
    const ing = await testIngress(redis, 'hung');
    try {
      expect((await post(ing, 'c1', 'before')).statusCode).toBe(202);

      pause();
      const started = Date.now();
      const during = await Promise.all(['m1', 'm2', 'm3'].map((id) => post(ing, 'c1', id)));
      const ready = await ing.app.inject({ method: 'GET', url: '/readyz' });
      const elapsed = Date.now() - started;
      for (const res of during) {
        expect(res.statusCode).toBe(503);
        expect(res.json()).toEqual({
          error: { code: 'REDIS_UNAVAILABLE', message: REDIS_UNAVAILABLE_MESSAGE },
        });
      }
      expect(ready.statusCode).toBe(503);
      // Three posts at once plus a readiness probe: each gave up after the command timeout.
      expect(elapsed).toBeLessThan(2 * COMMAND_TIMEOUT_MS + 1500);

      resume();
      // No reconnect needed: the same connection answers again.
      await waitFor(
        async () => (await ing.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 200,
        {
          timeoutMs: 10_000,
          what: 'the ingress to be ready again',
        },
      );
      // Redis may have run a write the ingress gave up on: the retry with the same id says
      // `duplicate` then, and either way each message is stored once.
      for (const id of ['m1', 'm2', 'm3']) {
        const retry = await post(ing, 'c1', id);
        expect(retry.statusCode).toBe(202);
        expect(['accepted', 'duplicate']).toContain(retry.json().status);
      }
      const ids = (await ing.store.readAllPending('c1')).map((m) => m.id);
      expect(ids.sort()).toEqual(['before', 'm1', 'm2', 'm3']);
      expect((await post(ing, 'c1', 'after')).statusCode).toBe(202);
    } finally {
      resume();
      await ing.close();
    }
  });
});

describe('a worker with Redis hung', () => {
  it('starts no turn while Redis hangs, and its running turn keeps its lease and commits under its own fence', async () => {
    const ingressRedis = connect('ingress');
    const workerRedis = connect('worker');
    await waitReady(ingressRedis);
    const ing = await testIngress(ingressRedis, 'hungw');
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((r) => {
      releaseFirst = r;
    });
    const calls: Array<{ chatKey: string; at: number }> = [];
    const { model } = scriptedModel(async (prompt, call, options) => {
      const chatKey = /ChatKey: (\S+)/.exec(systemText(prompt))?.[1] ?? '?';
      calls.push({ chatKey, at: Date.now() });
      if (call === 0) await firstHeld;
      return echoScript(prompt, call, options);
    });
    const deps = turnDeps(workerRedis, 'hungw', model, { leaseMs: 4000 });
    let worker: Worker<TurnJob> | undefined;
    try {
      expect((await post(ing, 'a', 'a1')).statusCode).toBe(202);
      expect((await post(ing, 'b', 'b1')).statusCode).toBe(202);
      worker = createTurnWorker(deps, {
        prefix: 'hungw',
        connection: workerRedis,
        concurrency: 1,
        lockDurationMs: 4000,
        stalledIntervalMs: 1000,
        turns: ing.turns,
      });
      void worker.run();
      await waitFor(async () => calls.length === 1, { what: 'the first turn to call the model' });
      const first = calls[0]!.chatKey;
      const second = first === 'a' ? 'b' : 'a';

      pause();
      // The model answers now; the turn's chat_send and commit wait for Redis.
      releaseFirst();
      await new Promise((r) => setTimeout(r, 1500));
      const resumedAt = Date.now();
      resume();
      // Nothing was taken while Redis hung: the other chat's turn started only afterwards.
      expect(calls.map((c) => c.chatKey)).toEqual([first]);

      await waitFor(
        async () =>
          (await deps.store.readHistory(first)).some((m) => m.role === 'assistant') &&
          (await deps.store.readHistory(second)).some((m) => m.role === 'assistant'),
        { timeoutMs: 15_000, what: 'both chats answered' },
      );
      expect(calls.find((c) => c.chatKey === second)!.at).toBeGreaterThanOrEqual(resumedAt);
      const events = await deps.store.readEvents(first, undefined, 100);
      const types = events.map((e) => e.type);
      expect(types).not.toContain('lease.takeover');
      expect(types).not.toContain('fence.rejected');
      expect(types.filter((t) => t === 'turn.committed')).toHaveLength(1);
      expect((await deps.store.readOutbox(first, undefined, 10)).map((o) => o.text)).toEqual([
        `echo: ${first}1`,
      ]);
    } finally {
      resume();
      await worker?.close();
      await ing.close();
    }
  });
});
