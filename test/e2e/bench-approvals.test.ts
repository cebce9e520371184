import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { keysUnder, testRedis } from '../helpers/redis.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('bench: tool approval latency', () => {
  it('measures the answer, the tool run and the commit at smoke size, and leaves no key behind', async () => {
    const res = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'bench/run.ts', '--only', 'approvals', '--smoke', '--runs', '1'],
      { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
    );
    expect(res.status, res.stderr).toBe(0);
    const report = JSON.parse(res.stdout) as {
      benchmarks: { approvals: { answers: number; medians: Record<string, number> } };
    };
    const { medians, answers } = report.benchmarks.approvals;
    expect(answers).toBe(3);
    expect(medians.accepted).toBeGreaterThan(0);
    expect(medians.toolRan).toBeGreaterThan(0);
    // The commit that settles it comes after the tool ran.
    expect(medians.settled).toBeGreaterThan(medians.toolRan!);
    const redis = testRedis();
    expect(await keysUnder(redis, 'clbench-*-bench-appr')).toEqual([]);
    redis.disconnect();
  }, 150_000);
});
