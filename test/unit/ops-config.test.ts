import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/shared/config.js';
import { SHUTDOWN_BACKSTOP_MS } from '../../src/shared/process/grace.js';

describe('sweeper, shutdown and scaling configuration', () => {
  it('has defaults', () => {
    const c = loadConfig({});
    expect(c.SWEEP_INTERVAL_MS).toBe(30_000);
    expect(c.SWEEP_BATCH).toBe(1000);
    expect(c.SHUTDOWN_GRACE_MS).toBe(25_000);
    expect(c.TURNS_GLOBAL_CONCURRENCY).toBeUndefined();
  });

  it('parses values and refuses bad ones by name', () => {
    const c = loadConfig({ SWEEP_INTERVAL_MS: '500', SWEEP_BATCH: '10', TURNS_GLOBAL_CONCURRENCY: '0' });
    expect(c).toMatchObject({ SWEEP_INTERVAL_MS: 500, SWEEP_BATCH: 10, TURNS_GLOBAL_CONCURRENCY: 0 });
    expect(loadConfig({ TURNS_GLOBAL_CONCURRENCY: ' ' }).TURNS_GLOBAL_CONCURRENCY).toBeUndefined();
    expect(() => loadConfig({ SWEEP_INTERVAL_MS: '10' })).toThrow(/SWEEP_INTERVAL_MS/);
    expect(() => loadConfig({ SWEEP_BATCH: '0' })).toThrow(/SWEEP_BATCH/);
    expect(() => loadConfig({ SHUTDOWN_GRACE_MS: '-1' })).toThrow(/SHUTDOWN_GRACE_MS/);
    expect(() => loadConfig({ TURNS_GLOBAL_CONCURRENCY: 'lots' })).toThrow(/TURNS_GLOBAL_CONCURRENCY/);
  });

  it("lets workers finish and exit before docker-compose's stop_grace_period escalates to SIGKILL", () => {
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const compose = parse(readFileSync(`${root}docker-compose.yml`, 'utf8')) as {
      services: Record<string, { stop_grace_period?: string; environment?: Record<string, unknown> }>;
    };
    for (const name of ['worker', 'compactor']) {
      const service = compose.services[name];
      const period = /^(\d+)s$/.exec(service?.stop_grace_period ?? '');
      expect(period, `${name}: stop_grace_period in seconds`).not.toBeNull();
      const env = service?.environment ?? {};
      const grace = loadConfig(
        env.SHUTDOWN_GRACE_MS === undefined ? {} : { SHUTDOWN_GRACE_MS: String(env.SHUTDOWN_GRACE_MS) },
      ).SHUTDOWN_GRACE_MS;
      expect(grace + SHUTDOWN_BACKSTOP_MS).toBeLessThan(Number(period![1]) * 1000);
    }
  });
});
