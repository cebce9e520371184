import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { deletePrefix, REDIS_URL, randomPrefix, testRedis } from '../helpers/redis.js';

// BullMQ is loaded through src/shared/bullmq.ts, which leaves cron-parser (and luxon) unloaded
// until a cron pattern is used (src/shared/cron-parser-on-demand.ts). chatlane's own schedulers
// use `every`; these tests prove a `pattern` scheduler still works for anyone who adds one.

const require = createRequire(import.meta.url);
const fromBullmq = createRequire(require.resolve('bullmq/dist/cjs/classes/job-scheduler.js'));
const CRON_CODE = /\/node_modules\/(luxon|cron-parser\/dist\/CronExpressionParser\.js)/;

const redis = testRedis();
const prefix = randomPrefix('cron');

afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

/**
 * A pattern scheduler in a node process of its own (the test files share processes, so another
 * file may have loaded the cron code already): whether the cron code was loaded before and after
 * it, the scheduler's next run and its delayed job's name.
 */
const PATTERN_SCHEDULER = `
import { createRequire } from 'node:module';
import { Queue } from ${JSON.stringify(new URL('../../dist/shared/bullmq.js', import.meta.url).href)};
const require = createRequire(import.meta.url);
const CRON_CODE = new RegExp(${JSON.stringify(CRON_CODE.source)});
const cronLoaded = () => Object.keys(require.cache).some((path) => CRON_CODE.test(path));
const before = cronLoaded();
const queue = new Queue('cron-test', { connection: { url: process.env.REDIS_URL }, prefix: process.env.PREFIX });
// Midnight of 1 January in UTC (the time zone goes through luxon).
await queue.upsertJobScheduler('new-year', { pattern: '0 0 1 1 *', tz: 'UTC' }, { name: 'tick' });
const next = (await queue.getJobScheduler('new-year'))?.next;
const [job] = await queue.getDelayed();
console.log(JSON.stringify({ before, after: cronLoaded(), next, job: job?.name }));
await queue.close();
`;

describe('a job scheduler with a cron pattern, BullMQ loaded through src/shared/bullmq.ts', () => {
  it('gets its next run from the pattern, and cron-parser and luxon are loaded only then', async () => {
    const year = new Date().getUTCFullYear();
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--input-type=module', '--eval', PATTERN_SCHEDULER],
      { env: { ...process.env, REDIS_URL, PREFIX: prefix }, cwd: new URL('../..', import.meta.url) },
    );
    expect(JSON.parse(stdout)).toEqual({
      before: false,
      after: true,
      next: Date.UTC(year + 1, 0, 1),
      job: 'tick',
    });
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
