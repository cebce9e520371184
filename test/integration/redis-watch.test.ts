import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ensureRedis } from '../../src/demo/dev-redis.js';
import { closeRedis, createRedisClient } from '../../src/shared/redis.js';
import { RedisUnreachableError, RedisWatch } from '../../src/shared/redis-watch.js';
import { freePort } from '../helpers/ports.js';

/**
 * RedisWatch on real connections to a throwaway redis-server of this test's own (started and
 * stopped by pid through ensureRedis): a Redis that goes away while a process runs is
 * reported a few times, not once per reconnect, and its return once.
 */

function capture() {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { lines, logger };
}

const topology = (url: string) => ({ REDIS_URL: url, REDIS_CLUSTER_NODES: undefined });

const until = async (what: () => boolean, timeoutMs = 20_000) => {
  const giveUpAt = Date.now() + timeoutMs;
  while (!what()) {
    if (Date.now() > giveUpAt) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('RedisWatch', () => {
  it('reports a Redis lost while running at most once per interval, with the count, and its return once', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    let server = await ensureRedis(url);
    const { lines, logger } = capture();
    const watch = new RedisWatch(topology(url), logger, 300);
    const a = watch.add(createRedisClient(topology(url), 'worker'));
    const b = watch.add(createRedisClient(topology(url), 'ingress'));
    try {
      await watch.ready();
      expect(lines, 'nothing to say when Redis answers at once').toEqual([]);

      await server.stop();
      await until(() => lines.length >= 1);
      // Two connections retrying for 1.5 s: many errors, a line per 300 ms at most.
      await new Promise((r) => setTimeout(r, 1500));
      const lost = lines.filter((l) => l.msg.startsWith('redis connection error:'));
      expect(lost.length).toBeGreaterThanOrEqual(1);
      expect(lost.length).toBeLessThanOrEqual(1500 / 300 + 2);
      expect(lost[0]?.msg).toMatch(new RegExp(`\\(Redis at ${url} \\(REDIS_URL\\)\\); reconnecting$`));
      expect(lost.every((l) => l.level === 40)).toBe(true);

      server = await ensureRedis(url);
      await until(() => lines.some((l) => l.msg === `Redis at ${url} (REDIS_URL) answers again`));
      expect(lines.filter((l) => l.msg.endsWith('answers again'))).toHaveLength(1);
    } finally {
      await closeRedis(a);
      await closeRedis(b);
      await server.stop();
    }
  });

  it('gives up waiting after timeoutMs with an error naming where it looked and why', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    const { lines, logger } = capture();
    const watch = new RedisWatch(topology(url), logger, 200);
    const client = watch.add(createRedisClient(topology(url), 'ingress'));
    try {
      const err = await watch.ready({ timeoutMs: 700 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisUnreachableError);
      expect((err as Error).message).toMatch(
        new RegExp(`^Redis at ${url} \\(REDIS_URL\\) did not answer within 1 s: connect ECONNREFUSED`),
      );
      expect(lines.length).toBeGreaterThanOrEqual(1);
      expect(lines.length).toBeLessThanOrEqual(700 / 200 + 1);
      for (const line of lines)
        expect(line.msg).toMatch(/^waiting for Redis at .* \(REDIS_URL\) to answer: /);
    } finally {
      await closeRedis(client);
    }
  });
});
