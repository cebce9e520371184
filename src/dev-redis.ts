import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';

/**
 * For the demo and local runs only: make sure a Redis answers at `url`, starting a
 * throwaway `redis-server` (no persistence) when none does and one is installed.
 */
export interface DevRedis {
  started: boolean;
  stop(): Promise<void>;
}

async function pings(url: string): Promise<boolean> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

export async function ensureRedis(url: string): Promise<DevRedis> {
  if (await pings(url)) return { started: false, stop: async () => undefined };
  const { hostname, port } = new URL(url);
  if (!['127.0.0.1', 'localhost', '::1'].includes(hostname)) {
    throw new Error(`no Redis answers at ${url}, and it is not local, so the demo will not start one`);
  }
  if (spawnSync('redis-server', ['--version']).status !== 0) {
    throw new Error(
      `no Redis answers at ${url} and redis-server is not installed (apt-get install redis-server)`,
    );
  }
  const child: ChildProcess = spawn(
    'redis-server',
    [
      '--port',
      port || '6379',
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--maxmemory-policy',
      'noeviction',
    ],
    { stdio: 'ignore' },
  );
  for (let i = 0; i < 50; i++) {
    if (await pings(url)) {
      return {
        started: true,
        stop: async () => {
          child.kill('SIGTERM');
          await new Promise((r) => child.once('exit', r));
        },
      };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`started redis-server on port ${port} but it never answered`);
}
