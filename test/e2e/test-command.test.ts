import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ensureRedis, pings } from '../../src/demo/dev-redis.js';
import { REDIS_URL } from '../helpers/redis.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env } });
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out })));
}

describe('the test command stands alone', () => {
  it('ensureRedis leaves a running Redis alone, and starts and stops a throwaway one where none answers', async () => {
    const existing = await ensureRedis(REDIS_URL);
    expect(existing.started).toBe(false);

    const url = `redis://127.0.0.1:${await freePort()}`;
    expect(await pings(url)).toBe(false);
    const throwaway = await ensureRedis(url);
    expect(throwaway.started).toBe(true);
    expect(await pings(url)).toBe(true);
    await throwaway.stop();
    expect(await pings(url)).toBe(false);
  });

  it('refuses to start a Redis for a URL that is not local', async () => {
    await expect(ensureRedis('redis://192.0.2.1:6379')).rejects.toThrow(/not local/);
  }, 10_000);

  it('the unit tests run without Redis: no global setup looks for one or starts one', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    const { code, out } = await run(
      ['node_modules/vitest/vitest.mjs', 'run', '--project', 'unit', 'test/unit/config.test.ts'],
      { REDIS_URL: url, REDIS_CLUSTER_NODES: '' },
    );
    expect(code, out).toBe(0);
    expect(out).not.toContain('redis-server');
    expect(out).not.toContain('tests need Redis');
    expect(await pings(url)).toBe(false);
  }, 60_000);

  it('a test run with nothing at REDIS_URL starts its own redis-server, passes, and leaves none behind', async () => {
    const port = await freePort();
    const url = `redis://127.0.0.1:${port}`;
    const { code, out } = await run(
      ['node_modules/vitest/vitest.mjs', 'run', 'test/integration/store.test.ts'],
      // The cluster variable, if this run has one, would make the child skip the local Redis.
      { REDIS_URL: url, REDIS_CLUSTER_NODES: '' },
    );
    expect(out).toContain(`started a throwaway redis-server at ${url}`);
    expect(code, out).toBe(0);
    expect(await pings(url)).toBe(false);
  }, 60_000);
});
