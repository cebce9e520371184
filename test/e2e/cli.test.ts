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

  it('an unknown role prints the usage and exits 2', () => {
    const res = run(['bogus'], {});
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('usage: chatlane <role>');
  });

  it("config --role worker prints the worker's variables with their defaults, and none only the ingress reads", () => {
    const res = run(['config', '--role', 'worker'], {});
    expect(res.status).toBe(0);
    expect(res.stdout).toMatch(/^WORKER_CONCURRENCY {2}\(integer; ≥ 1; default 32; roles: worker\)$/m);
    expect(res.stdout).toContain('LLM_BASE_URL');
    expect(res.stdout).not.toMatch(/^PORT /m);
    expect(run(['config'], {}).stdout).toMatch(
      /^PORT {2}\(integer; 0–65535; default 3000; roles: ingress\)$/m,
    );
  });

  it('config refuses a role that does not exist', () => {
    const res = run(['config', '--role', 'janitor'], {});
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('--role must be one of');
  });

  it('<role> --help says what the role does and which variables it needs, and starts nothing', () => {
    const res = run(['compactor', '--help'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(res.status).toBe(0);
    expect(res.stdout).toContain('chatlane compactor: Summarises');
    expect(res.stdout).toContain('COMPACTION_MODEL');
    expect(res.stdout).not.toContain('WORKER_CONCURRENCY');
  });
});
