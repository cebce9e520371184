import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/**
 * The chaos run's own Redis: a `redis-server` on a port chosen at run time, persisting every
 * write to its AOF before answering (`appendfsync always`) in a directory of its own, so it
 * can be killed and started again on the same port with nothing acknowledged lost.
 */

export interface OwnRedis {
  port: number;
  url: string;
  pid(): number | undefined;
  /** Stops the server with `signal` and waits for it to exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port and directory (the AOF is replayed). */
  start(): Promise<void>;
}

async function pings(url: string): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    // While the AOF loads, PING answers LOADING: not ready yet.
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/**
 * `args`: more redis-server arguments (`--replicaof`, ...), or a function of the start
 * (0 first): a restarted primary may come back as a replica. `conf`: a config file read
 * first (a sentinel's, run with `--sentinel`; it must be writable, sentinels rewrite it).
 */
export interface OwnRedisOptions {
  args?: string[] | ((start: number) => string[]);
  conf?: string;
  /** The log file's name in `dir` (default redis.log). */
  log?: string;
}

export function ownRedis(dir: string, port: number, options: OwnRedisOptions = {}): OwnRedis {
  const url = `redis://127.0.0.1:${port}`;
  let starts = 0;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    const extra = typeof options.args === 'function' ? options.args(starts++) : (options.args ?? []);
    const sentinel = extra.includes('--sentinel');
    const proc = spawn(
      'redis-server',
      [
        ...(options.conf ? [options.conf] : []),
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        // A sentinel refuses the data options.
        ...(sentinel
          ? []
          : [
              '--appendonly',
              'yes',
              '--appendfsync',
              'always',
              '--save',
              '',
              '--maxmemory-policy',
              'noeviction',
            ]),
        '--logfile',
        join(dir, options.log ?? 'redis.log'),
        ...extra,
      ],
      { stdio: 'ignore' },
    );
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    const spawnError = new Promise<Error>((resolve) => proc.once('error', resolve));
    for (let i = 0; i < 200; i++) {
      const failed = await Promise.race([
        spawnError,
        new Promise<undefined>((r) => setTimeout(() => r(undefined), 50)),
      ]);
      if (failed) throw new Error(`could not start redis-server (is it installed?): ${failed.message}`);
      if (proc.exitCode !== null)
        throw new Error(`redis-server exited with ${proc.exitCode}; see ${dir}/redis.log`);
      if (await pings(url)) return;
    }
    proc.kill('SIGKILL');
    throw new Error(`redis-server on port ${port} did not answer within 10 s; see ${dir}/redis.log`);
  };

  return {
    port,
    url,
    pid: () => child?.pid,
    start,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      await exited;
    },
  };
}

/** A short-lived client for one question to one server. */
export async function ask<T>(port: number, fn: (r: Redis) => Promise<T>): Promise<T | undefined> {
  const r = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return await fn(r);
  } catch {
    return undefined;
  } finally {
    r.disconnect();
  }
}

/** Replicas of the master past their initial sync (`state=online` in its INFO replication). */
