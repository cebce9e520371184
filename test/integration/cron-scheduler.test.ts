import { createRequire } from 'node:module';
import { afterAll, describe, expect, it } from 'vitest';
import { Queue } from '../../src/shared/bullmq.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

// BullMQ is loaded through src/shared/bullmq.ts, which leaves cron-parser (and luxon) unloaded
// until a cron pattern is used (src/shared/cron-parser-on-demand.ts). chatlane's own schedulers
// use `every`; these tests prove a `pattern` scheduler still works for anyone who adds one.

const require = createRequire(import.meta.url);
const fromBullmq = createRequire(require.resolve('bullmq/dist/cjs/classes/job-scheduler.js'));
const CRON_CODE = /\/node_modules\/(luxon|cron-parser\/dist\/CronExpressionParser\.js)/;
const cronLoaded = () => Object.keys(require.cache).some((path) => CRON_CODE.test(path));

const redis = testRedis();
const prefix = randomPrefix('cron');

afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

describe('a job scheduler with a cron pattern, BullMQ loaded through src/shared/bullmq.ts', () => {
  it('gets its next run from the pattern, and cron-parser and luxon are loaded only then', async () => {
    expect(cronLoaded()).toBe(false);
    const queue = new Queue('cron-test', { connection: redis, prefix });
    try {
      const year = new Date().getUTCFullYear();
      // Midnight of 1 January in UTC (the time zone goes through luxon).
      await queue.upsertJobScheduler('new-year', { pattern: '0 0 1 1 *', tz: 'UTC' }, { name: 'tick' });
      const scheduler = await queue.getJobScheduler('new-year');
      expect(scheduler?.next).toBe(Date.UTC(year + 1, 0, 1));
      const [job] = await queue.getDelayed();
      expect(job?.name).toBe('tick');
      expect(cronLoaded()).toBe(true);
    } finally {
      await queue.close();
    }
  });

  it("cron-parser's exports reach everyone who requires it, as the package's own", () => {
    const exported = fromBullmq('cron-parser') as typeof import('cron-parser');
    expect(Object.keys(exported)).toEqual(expect.arrayContaining(['CronExpressionParser', 'CronDate']));
    const next = exported.CronExpressionParser.parse('30 6 * * *', {
      currentDate: Date.UTC(2026, 0, 1, 12),
      tz: 'UTC',
    }).next();
    expect(next.getTime()).toBe(Date.UTC(2026, 0, 2, 6, 30));
  });
});
