import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const run = (args: string[], env: Record<string, string>) =>
  spawnSync(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });

describe('chatlane CLI', () => {
  it('a worker with no model configured exits non-zero naming the variables to set', () => {
    const res = run(['worker'], { LLM_BASE_URL: '', LLM_MODEL: '' });
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('no model configured');
    expect(res.stderr).toMatch(/LLM_BASE_URL and LLM_MODEL/);
  });

  it('a bad configuration value stops the process with a message naming the variable', () => {
    const res = run(['ingress'], { PORT: 'not-a-port' });
    expect(res.status).toBe(2);
    expect(res.stderr).toMatch(/PORT:/);
  });

  it.each([
    ['worker', { REDIS_SENTINEL_NAME: 'mymaster' }, /REDIS_SENTINELS: missing/],
    ['ingress', { REDIS_SENTINELS: '127.0.0.1:26379' }, /REDIS_SENTINEL_NAME: missing/],
    ['compactor', { REDIS_SENTINEL_PASSWORD: 'x' }, /REDIS_SENTINEL_PASSWORD: set without REDIS_SENTINELS/],
  ])(
    'half a Sentinel configuration stops the %s before it connects, naming the variable',
    (role, env, message) => {
      const res = run([role], { LLM_BASE_URL: 'http://127.0.0.1:1/v1', LLM_MODEL: 'mock', ...env });
      expect(res.status).toBe(2);
      expect(res.stderr).toMatch(message);
    },
  );

  it('an unknown role prints the usage and exits 2', () => {
    const res = run(['bogus'], {});
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('usage: chatlane <role>');
  });
});
