import { Redis } from 'ioredis';
import { loadConfig } from '../../src/shared/config.js';

/** Tests need a real Redis: fail the run at once, with a clear message, when none answers. */
export default async function setup(): Promise<void> {
  const url = loadConfig().REDIS_URL;
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new Error(`tests need Redis at ${url} (set REDIS_URL): ${(err as Error).message}`);
  } finally {
    redis.disconnect();
  }
}
