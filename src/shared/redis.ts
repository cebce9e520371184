import { Redis, type RedisOptions } from 'ioredis';

/**
 * Connection roles differ in how they fail (DESIGN §5): workers wait out a Redis blip
 * (`maxRetriesPerRequest: null`, required by BullMQ's blocking calls); the ingress fails
 * fast so a request errors with 503 instead of hanging.
 */
export type ConnectionRole = 'worker' | 'ingress';

export function redisOptions(role: ConnectionRole): RedisOptions {
  if (role === 'worker') return { maxRetriesPerRequest: null, enableReadyCheck: true };
  return {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    enableAutoPipelining: true,
  };
}

export function createRedis(url: string, role: ConnectionRole, connectionName?: string): Redis {
  return new Redis(url, { ...redisOptions(role), ...(connectionName ? { connectionName } : {}) });
}

/** Wait until a fail-fast connection is ready (it queues nothing while offline). */
export async function waitReady(redis: Redis, timeoutMs = 5000): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`redis not ready after ${timeoutMs}ms (status ${redis.status})`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      redis.off('ready', onReady);
    };
    redis.on('ready', onReady);
  });
}

/** quit() that never throws and can be called twice. */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}
