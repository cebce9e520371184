import { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/shared/config.js';
import type { Logger } from '../../src/shared/logger.js';
import {
  checkRedisPolicy,
  clusterOptions,
  createRedisClient,
  type RedisClient,
} from '../../src/shared/redis.js';
import { redisWhere } from '../../src/shared/redis-watch.js';

describe('REDIS_CLUSTER_NODES', () => {
  it('is unset by default: a single Redis at REDIS_URL', () => {
    expect(loadConfig({}).REDIS_CLUSTER_NODES).toBeUndefined();
    expect(loadConfig({ REDIS_CLUSTER_NODES: '  ' }).REDIS_CLUSTER_NODES).toBeUndefined();
  });

  it('parses a comma-separated host:port list, IPv6 in brackets', () => {
    expect(
      loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7101, redis-b.internal:7000,[::1]:7002' })
        .REDIS_CLUSTER_NODES,
    ).toEqual([
      { host: '127.0.0.1', port: 7101 },
      { host: 'redis-b.internal', port: 7000 },
      { host: '::1', port: 7002 },
    ]);
  });

  it.each(['127.0.0.1', '127.0.0.1:0', 'a:70000', 'a:7000,', 'redis://a:7000', 'a b:7000'])(
    'refuses %j, naming the variable',
    (value) => {
      expect(() => loadConfig({ REDIS_CLUSTER_NODES: value })).toThrow(ConfigError);
      expect(() => loadConfig({ REDIS_CLUSTER_NODES: value })).toThrow(/REDIS_CLUSTER_NODES/);
    },
  );
});

describe('createRedisClient', () => {
  const lazy = <T extends RedisClient>(c: T): T => {
    c.disconnect();
    return c;
  };

  it('builds a Redis without cluster nodes and a Cluster with them', () => {
    const single = lazy(createRedisClient(loadConfig({}), 'worker'));
    expect(single).toBeInstanceOf(Redis);
    const cluster = lazy(
      createRedisClient(loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:1,127.0.0.1:2' }), 'worker'),
    );
    expect(cluster).toBeInstanceOf(Cluster);
  });

  it("auto-pipelines by default and not on a connection opened without it (BullMQ's), single or Cluster", () => {
    const nodes = loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:1' });
    for (const config of [loadConfig({}), nodes]) {
      expect(lazy(createRedisClient(config, 'worker')).options.enableAutoPipelining).toBe(true);
      const off = lazy(createRedisClient(config, 'worker', 'bullmq', { autoPipelining: false }));
      expect(off.options.enableAutoPipelining).toBe(false);
    }
  });

  it('keeps the role semantics on a Cluster: workers wait, the ingress fails fast', () => {
    const worker = clusterOptions('worker');
    expect(worker.redisOptions?.maxRetriesPerRequest).toBeNull();
    expect(worker.enableOfflineQueue).toBeUndefined(); // ioredis default: queue while reconnecting
    const ingress = clusterOptions('ingress');
    expect(ingress.enableOfflineQueue).toBe(false);
    expect(ingress.redisOptions?.maxRetriesPerRequest).toBe(1);
    expect(ingress.redisOptions?.connectTimeout).toBe(2000);
  });

  it('times commands out on ingress connections only: a worker connection (and every BullMQ duplicate of it) has none', () => {
    const config = loadConfig({});
    expect(config.REDIS_COMMAND_TIMEOUT_MS).toBe(1000);
    const ingress = lazy(createRedisClient(config, 'ingress')) as Redis;
    expect(ingress.options.commandTimeout).toBe(1000);
    const worker = lazy(createRedisClient(config, 'worker')) as Redis;
    expect(worker.options.commandTimeout).toBeUndefined();
    // What BullMQ does for its blocking fetch: the duplicate inherits, so it must have none.
    const blocking = lazy(worker.duplicate());
    expect(blocking.options.commandTimeout).toBeUndefined();
    expect(clusterOptions('ingress', undefined, { commandTimeoutMs: 700 }).redisOptions?.commandTimeout).toBe(
      700,
    );
    expect(
      clusterOptions('worker', undefined, { commandTimeoutMs: 700 }).redisOptions?.commandTimeout,
    ).toBeUndefined();
    expect(
      lazy(createRedisClient(loadConfig({ REDIS_COMMAND_TIMEOUT_MS: '0' }), 'ingress')).options,
    ).not.toHaveProperty('commandTimeout');
  });

  it('lends REDIS_URL credentials and TLS to every cluster node, never its host', () => {
    const opts = clusterOptions('worker', 'rediss://app:s%40cret@ignored.example:6380/3');
    expect(opts.redisOptions).toMatchObject({ username: 'app', password: 's@cret', tls: {} });
    expect(opts.redisOptions).not.toHaveProperty('host');
    expect(clusterOptions('ingress', 'redis://127.0.0.1:6379').redisOptions).not.toHaveProperty('password');
  });
});

describe('checkRedisPolicy', () => {
  type Entry = { level: 'warn' | 'debug'; obj: Record<string, unknown>; msg: string };
  function recorder() {
    const entries: Entry[] = [];
    const logger = {
      warn: (obj: Record<string, unknown>, msg: string) => entries.push({ level: 'warn', obj, msg }),
      debug: (obj: Record<string, unknown>, msg: string) => entries.push({ level: 'debug', obj, msg }),
    } as unknown as Logger;
    return { entries, logger };
  }
  // A stand-in for one server: only what the check calls.
  const fakeRedis = (config: () => Promise<unknown>) =>
    ({ options: { host: 'r1', port: 6379 }, config }) as unknown as Redis;

  it('says nothing for noeviction', async () => {
    const { entries, logger } = recorder();
    await checkRedisPolicy(
      fakeRedis(async () => ['maxmemory-policy', 'noeviction']),
      logger,
    );
    expect(entries).toEqual([]);
  });

  it('warns, naming the server and the policy, for anything else', async () => {
    const { entries, logger } = recorder();
    await checkRedisPolicy(
      fakeRedis(async () => ['maxmemory-policy', 'allkeys-lru']),
      logger,
    );
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      level: 'warn',
      obj: { redis: 'r1:6379', maxmemoryPolicy: 'allkeys-lru' },
    });
    expect(entries[0]!.msg).toMatch(/not noeviction/);
  });

  it('logs at debug only when CONFIG is disabled or renamed (managed Redis)', async () => {
    const { entries, logger } = recorder();
    await checkRedisPolicy(
      fakeRedis(async () => {
        throw new Error("ERR unknown command 'CONFIG'");
      }),
      logger,
    );
    await checkRedisPolicy(
      fakeRedis(async () => []),
      logger,
    );
    expect(entries.map((e) => e.level)).toEqual(['debug', 'debug']);
  });

  it('gives up quietly on a server that does not answer', async () => {
    const { entries, logger } = recorder();
    const started = Date.now();
    await checkRedisPolicy(
      fakeRedis(() => new Promise(() => undefined)),
      logger,
    );
    expect(Date.now() - started).toBeLessThan(4000);
    expect(entries.map((e) => e.level)).toEqual(['debug']);
  }, 10_000);
});

describe('redisWhere', () => {
  it('names REDIS_URL without its password', () => {
    expect(redisWhere(loadConfig({ REDIS_URL: 'redis://app:s3cret@redis.internal:6380/2' }))).toBe(
      'Redis at redis://app:***@redis.internal:6380/2 (REDIS_URL)',
    );
    expect(redisWhere(loadConfig({}))).toBe('Redis at redis://127.0.0.1:6379 (REDIS_URL)');
  });

  it('names the Sentinel or Cluster variables when those are in use', () => {
    const config = loadConfig({
      REDIS_SENTINELS: '10.0.0.1:26379,[::1]:26380',
      REDIS_SENTINEL_NAME: 'mymaster',
    });
    expect(redisWhere(config)).toBe(
      "the master 'mymaster' of the sentinels 10.0.0.1:26379,[::1]:26380 (REDIS_SENTINELS, REDIS_SENTINEL_NAME)",
    );
    expect(redisWhere(loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7101,127.0.0.1:7102' }))).toBe(
      'the Redis Cluster at 127.0.0.1:7101,127.0.0.1:7102 (REDIS_CLUSTER_NODES)',
    );
  });
});
