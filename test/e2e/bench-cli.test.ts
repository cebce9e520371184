import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function bench(...args: string[]) {
  return spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('bench/run.ts flags', () => {
  it('refuses --node-args for a benchmark that would not pass them on, before it starts anything', () => {
    const res = bench('--only', 'overhead', '--node-args=--no-memory-reducer');
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('--node-args applies to the stream benchmark only, not to overhead');
    expect(res.stdout).toBe('');
  });

  it('refuses --bursts without --only stream, before it starts anything', () => {
    const res = bench('--only', 'overhead', '--bursts');
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('--bursts and --apart apply to the stream benchmark only');
    expect(res.stdout).toBe('');
  });
});
