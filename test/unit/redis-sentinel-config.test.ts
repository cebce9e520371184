import { Redis, ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/shared/config.js';
import { closeRedis, createRedisClient, followPrimary } from '../../src/shared/redis.js';
import { isRedisUnavailable } from '../../src/shared/redis-errors.js';
import { ReplicationTimeoutError, replicaAcks } from '../../src/shared/replica-acks.js';

const sentinel = { REDIS_SENTINELS: '10.0.0.1:26379, [::1]:26380', REDIS_SENTINEL_NAME: 'mymaster' };

describe('Sentinel configuration', () => {
  it('parses the sentinels as host:port and keeps the name and password', () => {
    const config = loadConfig({ ...sentinel, REDIS_SENTINEL_PASSWORD: 's3cret' });
    expect(config.REDIS_SENTINELS).toEqual([
      { host: '10.0.0.1', port: 26379 },
      { host: '::1', port: 26380 },
    ]);
    expect(config.REDIS_SENTINEL_NAME).toBe('mymaster');
    expect(config.REDIS_SENTINEL_PASSWORD).toBe('s3cret');
  });

  it.each([
    [{ REDIS_SENTINELS: '10.0.0.1:26379' }, /REDIS_SENTINEL_NAME: missing/],
    [{ REDIS_SENTINEL_NAME: 'mymaster' }, /REDIS_SENTINELS: missing/],
    [{ REDIS_SENTINEL_PASSWORD: 'x' }, /REDIS_SENTINEL_PASSWORD: set without REDIS_SENTINELS/],
    [
      { ...sentinel, REDIS_CLUSTER_NODES: '127.0.0.1:7000' },
      /REDIS_SENTINELS: set together with REDIS_CLUSTER_NODES/,
    ],
    [{ ...sentinel, REDIS_SENTINELS: '10.0.0.1' }, /REDIS_SENTINELS: '10.0.0.1' is not host:port/],
  ])('refuses half a setup or a bad value, naming the variable: %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('builds one Redis per connection that asks the sentinels for the master and checks its role', async () => {
    const redis = createRedisClient(
      loadConfig({ ...sentinel, REDIS_SENTINEL_PASSWORD: 'sp', REDIS_URL: 'redis://app:pw@ignored:1/3' }),
      'worker',
      'chatlane:test',
    ) as Redis;
    await closeRedis(redis);
    expect(redis).toBeInstanceOf(Redis);
    expect(redis.options).toMatchObject({
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      name: 'mymaster',
      role: 'master',
      failoverDetector: false,
      sentinelPassword: 'sp',
      username: 'app',
      password: 'pw',
      db: 3,
      connectionName: 'chatlane:test',
      maxRetriesPerRequest: null,
    });
    expect(redis.options.tls).toBeUndefined();
  });

  it('turns TLS on for the sentinels and the data nodes with a rediss: REDIS_URL', async () => {
    const redis = createRedisClient(
      loadConfig({ ...sentinel, REDIS_URL: 'rediss://h:6380' }),
      'ingress',
    ) as Redis;
    await closeRedis(redis);
    expect(redis.options).toMatchObject({ tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true });
    // The ingress keeps failing fast in Sentinel mode too.
    expect(redis.options).toMatchObject({ enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  });
});

describe('a connection to a demoted primary', () => {
  const readOnly = new ReplyError("READONLY You can't write against a read only replica.");

  it('reconnects on READONLY: a worker resends the command, the ingress fails it (503)', () => {
    expect(followPrimary('worker')(readOnly)).toBe(2);
    expect(followPrimary('ingress')(readOnly)).toBe(1);
    expect(isRedisUnavailable(readOnly)).toBe(true);
  });

  it('does not reconnect on any other error', () => {
    for (const role of ['worker', 'ingress'] as const) {
      expect(followPrimary(role)(new ReplyError('ERR wrong number of arguments'))).toBe(false);
      expect(followPrimary(role)(new ReplyError('NOSCRIPT No matching script'))).toBe(false);
    }
  });

  it('is set on single-Redis connections too (a managed service fails over behind one DNS name)', async () => {
    const redis = createRedisClient(loadConfig({}), 'worker') as Redis;
    await closeRedis(redis);
    expect(redis.options.reconnectOnError?.(readOnly)).toBe(2);
  });
});

describe('REDIS_REPLICA_ACKS', () => {
  it('defaults to 0 (no waiting) with a 500 ms timeout', () => {
    const config = loadConfig({});
    expect(config.REDIS_REPLICA_ACKS).toBe(0);
    expect(config.REDIS_REPLICA_ACKS_TIMEOUT_MS).toBe(500);
    expect(replicaAcks(config)).toBeUndefined();
  });

  it('refuses a WAIT timeout the ingress command timeout would cut, naming the variable', () => {
    const env = {
      REDIS_REPLICA_ACKS: '1',
      REDIS_REPLICA_ACKS_TIMEOUT_MS: '1000',
      REDIS_COMMAND_TIMEOUT_MS: '1000',
    };
    expect(() => loadConfig(env)).toThrow(
      /REDIS_REPLICA_ACKS_TIMEOUT_MS: must be below REDIS_COMMAND_TIMEOUT_MS/,
    );
    expect(loadConfig({ ...env, REDIS_COMMAND_TIMEOUT_MS: '0' }).REDIS_REPLICA_ACKS).toBe(1);
  });

  it('an unconfirmed write is a retryable Redis failure, not a bug', () => {
    expect(isRedisUnavailable(new ReplicationTimeoutError(1, 0, 500))).toBe(true);
  });
});
