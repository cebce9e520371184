import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';

/**
 * For the demo and the test suite only: make sure a Redis answers at `url`, starting a
 * throwaway `redis-server` (no persistence) when none does and one is installed.
 */
export interface DevRedis {
  started: boolean;
  stop(): Promise<void>;
}

/** True when a Redis answers PING at `url`; never throws, never logs. */
export async function pings(url: string): Promise<boolean> {
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
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(hostname)) {
    throw new Error(`no Redis answers at ${url}, and it is not local, so none is started`);
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
  // Whatever way this process ends, the throwaway server ends with it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      process.off('exit', killOnExit);
      resolve();
    }),
  );
  for (let i = 0; i < 50 && !exited; i++) {
    if (await pings(url)) {
      return {
        started: true,
        stop: async () => {
          if (!exited) child.kill('SIGTERM');
          await exit;
        },
      };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  await exit;
  throw new Error(`started redis-server on port ${port || '6379'} but it never answered`);
}
