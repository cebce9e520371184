import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SENTINEL_MASTER_NAME, type SentinelSetup, startSentinels } from '../../scripts/chaos/sentinel.js';
import { loadConfig } from '../../src/shared/config.js';
import { closeRedis, createRedisClient, type RedisClient, waitReady } from '../../src/shared/redis.js';
import { isRedisUnavailable } from '../../src/shared/redis-errors.js';
import { ReplicationTimeoutError, replicaAcks } from '../../src/shared/replica-acks.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { testIngress } from '../helpers/ingress.js';
import { REDIS_URL, randomPrefix, waitFor } from '../helpers/redis.js';
import { echoScript, scriptedModel } from '../helpers/scripted-model.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

/**
 * Real Sentinel: a primary, a replica and three sentinels (scripts/chaos/sentinel.ts), all
 * redis-server processes on spare ports. Connections built from REDIS_SENTINELS follow a
 * failover; REDIS_REPLICA_ACKS confirms a write on the replica with WAIT.
 */

let setup: SentinelSetup;
let dir: string;
const clients: RedisClient[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chatlane-sentinel-'));
  setup = await startSentinels(dir);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => closeRedis(c)));
  await setup?.stop('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function connect(role: 'ingress' | 'worker', env: Record<string, string> = {}): RedisClient {
  const config = loadConfig({
    REDIS_SENTINELS: setup.sentinelList,
    REDIS_SENTINEL_NAME: SENTINEL_MASTER_NAME,
    ...env,
  });
  const client = createRedisClient(config, role, `chatlane:test-${role}`);
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

const serverPort = async (client: RedisClient) =>
  Number(/tcp_port:(\d+)/.exec(await (client as Redis).info('server'))?.[1]);

describe('REDIS_REPLICA_ACKS over Sentinel', () => {
  it('answers 202 once the replica confirmed the message, and it is on the replica', async () => {
    const redis = connect('ingress');
    await waitReady(redis);
    const acks = replicaAcks({ REDIS_REPLICA_ACKS: 1, REDIS_REPLICA_ACKS_TIMEOUT_MS: 500 })!;
    const ing = await testIngress(redis, randomPrefix('sent'), { replicaAcks: acks });
    try {
      const res = await ing.app.inject({
        method: 'POST',
        url: '/v1/chats/c1/messages',
        payload: { id: 'm1', text: 'hello' },
      });
      expect(res.statusCode).toBe(202);
      const replica = new Redis({ port: setup.replica.port, host: '127.0.0.1', lazyConnect: true });
      try {
        await replica.connect();
        expect(await replica.xlen(ing.store.keys('c1').inbox)).toBe(1);
      } finally {
        replica.disconnect();
      }
    } finally {
      await ing.close();
    }
  });
});

describe('REDIS_REPLICA_ACKS without enough replicas', () => {
  it('answers 503 REPLICATION_TIMEOUT (a retry with the same id is idempotent)', async () => {
    // The shared Redis has no replica: WAIT 1 can only time out.
    const redis = createRedisClient(loadConfig({ REDIS_URL }), 'ingress');
    clients.push(redis);
    await waitReady(redis);
    const acks = replicaAcks({ REDIS_REPLICA_ACKS: 1, REDIS_REPLICA_ACKS_TIMEOUT_MS: 100 })!;
    const ing = await testIngress(redis, randomPrefix('noreplica'), { replicaAcks: acks });
    try {
      const post = () =>
        ing.app.inject({ method: 'POST', url: '/v1/chats/c1/messages', payload: { id: 'm1', text: 'hi' } });
      const first = await post();
      expect(first.statusCode).toBe(503);
      expect(first.json().error.code).toBe('REPLICATION_TIMEOUT');
      expect(first.json().error.message).toMatch(/retry with the same id/);
      const retry = await post();
      expect(retry.statusCode).toBe(503);
      expect((await ing.store.readAllPending('c1')).map((m) => m.id)).toEqual(['m1']);
    } finally {
      await ing.close();
    }
  });

  it('refuses to confirm on a connection that reconnected since the write', async () => {
    const redis = createRedisClient(loadConfig({ REDIS_URL }), 'worker');
    clients.push(redis);
    await waitReady(redis);
    const acks = replicaAcks({ REDIS_REPLICA_ACKS: 1, REDIS_REPLICA_ACKS_TIMEOUT_MS: 100 })!;
    const mark = acks.mark(redis, 'k');
    redis.disconnect(true);
    await waitFor(async () => redis.status === 'ready', { what: 'the reconnect' });
    const err = await acks.confirm(mark).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReplicationTimeoutError);
    expect((err as ReplicationTimeoutError).reason).toBe('reconnected');
  });
});

describe('a Sentinel connection', () => {
  it('that ends without being closed on purpose connects again by itself', async () => {
    const worker = connect('worker');
    await waitReady(worker);
    // What ioredis does when its connector fails mid-failover: the connection ends.
    worker.disconnect();
    await waitFor(async () => worker.status === 'end', { what: 'the connection to end' });
    await waitFor(async () => worker.status === 'ready', { timeoutMs: 10_000, what: 'the reconnect' });
    expect(await worker.ping()).toBe('PONG');
  });
});

describe('REDIS_REPLICA_ACKS and a turn', () => {
  it('a turn whose connection reconnected since it took the lease sends nothing more and does not commit; the retry answers once', async () => {
    const redis = connect('worker');
    await waitReady(redis);
    const acks = replicaAcks({ REDIS_REPLICA_ACKS: 1, REDIS_REPLICA_ACKS_TIMEOUT_MS: 2000 })!;
    let reconnectFirst = true;
    const scripted = scriptedModel(async (prompt, call, options) => {
      if (reconnectFirst) {
        // As a failover does: the connection comes back, maybe to another server, and
        // what this turn wrote before and nobody confirmed may be gone.
        reconnectFirst = false;
        const back = new Promise((resolve) => redis.once('ready', resolve));
        redis.disconnect(true);
        await back;
      }
      return echoScript(prompt, call, options);
    });
    const deps = turnDeps(redis, randomPrefix('acks-turn'), scripted.model, {}, { replicaAcks: acks });
    const { store } = deps;
    await ingestTexts(store, 'c', 'hello');

    const first = await runTurn(deps, 'c').catch((e: unknown) => e);
    expect(first).toBeInstanceOf(ReplicationTimeoutError);
    expect((first as ReplicationTimeoutError).reason).toBe('reconnected');
    expect(await store.readHistory('c')).toEqual([]);
    expect(await store.pendingCount('c')).toBe(1);
    // Its chat_send came after the reconnect: refused before the write. (Written, it would
    // have been placed by the retry after messages whose earlier answer a failover took.)
    expect(await store.readOutbox('c', undefined, 10)).toEqual([]);

    // The job's retry answers.
    const retry = await runTurn(deps, 'c');
    expect(retry.status).toBe('done');
    expect((await store.readOutbox('c', undefined, 10)).map((o) => o.text)).toEqual(['echo: hello']);
    const history = await store.readHistory('c');
    expect(history[0]?.role).toBe('user');
    expect(history.filter((m) => m.role === 'assistant').length).toBeGreaterThan(0);
  });
});

describe('a Sentinel failover', () => {
  it('every connection follows it: worker writes carry on, an ingress gets 503-class errors at most, the demoted primary answers READONLY', async () => {
    const worker = connect('worker');
    const ingress = connect('ingress');
    await waitReady(worker);
    await waitReady(ingress);
    const before = await serverPort(worker);
    expect(before).toBe(setup.primary.port);

    let writes = 0;
    const errors: unknown[] = [];
    let stop = false;
    const key = `${randomPrefix('fo')}:n`;
    const loop = (async () => {
      while (!stop) {
        await worker.incr(key).then(
          () => writes++,
          (err: unknown) => errors.push(err),
        );
        await ingress.get(key).catch((err: unknown) => {
          if (!isRedisUnavailable(err)) errors.push(err);
        });
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await waitFor(async () => writes > 10, { what: 'writes before the failover' });
    // A graceful failover: the sentinels promote the replica and demote the primary, which
    // stays up — the stale-primary case.
    const writesBefore = writes;
    const s = new Redis({ port: setup.sentinels[0]!.port, host: '127.0.0.1' });
    try {
      expect(await s.call('SENTINEL', 'FAILOVER', SENTINEL_MASTER_NAME)).toBe('OK');
    } finally {
      s.disconnect();
    }
    await waitFor(async () => (await setup.masterPort()) === setup.replica.port, {
      timeoutMs: 20_000,
      what: 'the sentinels to name the replica master',
    });
    await waitFor(async () => (await serverPort(worker)) === setup.replica.port, {
      timeoutMs: 20_000,
      what: 'the worker connection on the new primary',
    });
    await waitFor(async () => (await serverPort(ingress).catch(() => 0)) === setup.replica.port, {
      timeoutMs: 20_000,
      what: 'the ingress connection on the new primary',
    });
    const writesAfter = writes;
    await waitFor(async () => writes > writesAfter + 10, { what: 'writes after the failover' });
    stop = true;
    await loop;
    expect(errors).toEqual([]);
    // Every write before the failover is on the new primary. (Writes the old primary took
    // between the promotion and its own demotion are not: Sentinel's failover is not
    // synchronous — what REDIS_REPLICA_ACKS is for.)
    const kept = Number(await worker.get(key));
    expect(kept).toBeGreaterThanOrEqual(writesBefore);
    expect(kept).toBeLessThanOrEqual(writes);

    // The old primary is a replica now: a connection still pointed at it (a managed service's
    // DNS name not yet moved) gets READONLY — a 503 for the ingress — and reconnects.
    const probe = createRedisClient(loadConfig({ REDIS_URL: setup.primary.url }), 'worker');
    clients.push(probe);
    await waitFor(async () => /role:slave/.test(await (probe as Redis).info('replication')), {
      timeoutMs: 20_000,
      what: 'the old primary to be demoted',
    });
    const stale = createRedisClient(loadConfig({ REDIS_URL: setup.primary.url }), 'ingress');
    clients.push(stale);
    stale.on('error', () => undefined);
    await waitReady(stale);
    const reconnecting = new Promise<void>((resolve) => stale.once('reconnecting', () => resolve()));
    const err = await stale.set(key, 'x').catch((e: unknown) => e);
    expect(String(err)).toMatch(/READONLY/);
    expect(isRedisUnavailable(err)).toBe(true);
    await reconnecting;
  });
});
