import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { keysUnder, REDIS_URL, randomPrefix, testRedis } from '../helpers/redis.js';

const run = promisify(execFile);
const script = (name: string) => fileURLToPath(new URL(`../../bench/probes/${name}`, import.meta.url));

/** The probe's JSON on stdout, run with plain node as docs/benchmarks.md runs it. */
async function probe(name: string, env: Record<string, string>, args: string[] = []): Promise<unknown> {
  const { stdout } = await run(process.execPath, [script(name), ...args], {
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
  return JSON.parse(stdout);
}

// The machine probes the streamed-replies figures lean on (docs/benchmarks.md), at sizes that
// only prove they run and report what they say: never a figure.
describe('the benchmarks’ machine probes', () => {
  const redis = testRedis();
  afterAll(async () => {
    await redis.quit();
  });

  it('wake-cost reports every sleep for each working set, each against the no-sleep one', async () => {
    const out = (await probe('wake-cost.mjs', { WAKE_COST_ITERATIONS: '10' })) as {
      iterations: number[];
      results: Array<{
        workingSetKiB: number;
        rows: Array<{ sleepMs: number; cpuUsPerWake: number; overNoSleepUs: number }>;
      }>;
    };
    expect(out.iterations).toEqual([10, 10, 10, 10, 10]);
    expect(out.results.map((r) => r.workingSetKiB)).toEqual([64, 4096]);
    for (const { rows } of out.results) {
      expect(rows.map((r) => r.sleepMs)).toEqual([0, 1, 2, 5, 10]);
      for (const row of rows) {
        expect(row.cpuUsPerWake).toBeGreaterThan(0);
        expect(row.overNoSleepUs).toBeCloseTo(row.cpuUsPerWake - rows[0]!.cpuUsPerWake, 0);
      }
    }
  });

  it('queue-cost weighs a BullMQ worker against the same pacing without a queue and leaves no key behind', async () => {
    const prefix = randomPrefix('queue-cost');
    const out = (await probe('queue-cost.mjs', {
      REDIS_URL,
      QUEUE_COST_PREFIX: prefix,
      QUEUE_COST_RATE: '100',
      QUEUE_COST_HOLD_MS: '100',
      QUEUE_COST_WARMUP: '10',
      QUEUE_COST_JOBS: '40',
      QUEUE_COST_RUNS: '2',
    })) as {
      measured: number;
      runs: Array<{ queueUsPerJob: number; bareUsPerJob: number }>;
      median: { queueUsPerJob: number; bareUsPerJob: number; queueOverBareUs: number };
    };
    expect(out.measured).toBe(40);
    expect(out.runs).toHaveLength(2);
    for (const r of out.runs) {
      expect(r.queueUsPerJob).toBeGreaterThan(0);
      expect(r.bareUsPerJob).toBeGreaterThan(0);
    }
    expect(out.median.queueOverBareUs).toBe(out.median.queueUsPerJob - out.median.bareUsPerJob);
    expect([...(await keysUnder(redis, `${prefix}-0`)), ...(await keysUnder(redis, `${prefix}-1`))]).toEqual(
      [],
    );
  });

  it('ingress-pair loads the default ingress and a variant at once, one ratio per round, and leaves no key behind', async () => {
    const prefix = randomPrefix('ingress-pair');
    const out = (await probe(
      'ingress-pair.mjs',
      { REDIS_URL, INGRESS_PAIR_PREFIX: prefix, INGRESS_PAIR_SECONDS: '1', INGRESS_PAIR_ROUNDS: '2' },
      ['REDIS_COMMAND_TIMEOUT_MS=0'],
    )) as {
      variant: Record<string, string>;
      rounds: Array<{
        default: { reqPerSec: number; cpuUsPerMessage: number; non2xx: number };
        variant: { reqPerSec: number; cpuUsPerMessage: number; non2xx: number };
        cpuRatio: number;
      }>;
    };
    expect(out.variant).toEqual({ REDIS_COMMAND_TIMEOUT_MS: '0' });
    expect(out.rounds).toHaveLength(2);
    for (const r of out.rounds) {
      for (const side of [r.default, r.variant]) {
        expect(side.reqPerSec).toBeGreaterThan(0);
        expect(side.cpuUsPerMessage).toBeGreaterThan(0);
        expect(side.non2xx).toBe(0);
      }
      expect(r.cpuRatio).toBeCloseTo(r.variant.cpuUsPerMessage / r.default.cpuUsPerMessage, 2);
    }
    expect(await keysUnder(redis, prefix)).toEqual([]);
  });
});
