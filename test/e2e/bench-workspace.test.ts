import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { keysUnder, testRedis } from '../helpers/redis.js';
import { haveSandbox } from '../helpers/sandbox.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe.skipIf(!haveSandbox)('bench: exec_shell workspace', () => {
  it('measures every phase for both sizes at smoke size and leaves no key behind', async () => {
    const res = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'bench/run.ts', '--only', 'workspace', '--smoke', '--runs', '1'],
      { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
    );
    expect(res.status, res.stderr).toBe(0);
    const report = JSON.parse(res.stdout) as {
      benchmarks: {
        workspace: { sizes: Array<{ label: string; tarBytes: number; msMedian: Record<string, number> }> };
      };
    };
    const sizes = report.benchmarks.workspace.sizes;
    expect(sizes.map((s) => s.label)).toEqual(['small', '1MB']);
    expect(sizes[1]!.tarBytes).toBeGreaterThan(1024 * 1024);
    for (const size of sizes) {
      expect(Object.keys(size.msMedian).sort()).toEqual(
        ['archive', 'bareCommand', 'read', 'restore', 'save', 'turnReadOnly', 'turnWrite'].sort(),
      );
      for (const ms of Object.values(size.msMedian)) expect(ms).toBeGreaterThan(0);
    }
    const redis = testRedis();
    expect(await keysUnder(redis, 'clbench-*-workspace')).toEqual([]);
    redis.disconnect();
  }, 150_000);
});
