import { describe, expect, it, vi } from 'vitest';
import type { TracingSettings } from '../../src/shared/tracing/settings.js';

/**
 * One tracing SDK a process, however many chatlane instances start it (the CLI and its
 * launch, or two startChatlane calls): made once, shut down when the last holder lets go. The
 * SDK itself is replaced here (a real one registers OpenTelemetry's globals for the process).
 */

const sdk = vi.hoisted(() => ({ started: 0, shutdowns: 0 }));
vi.mock('../../src/shared/tracing/sdk.js', () => ({
  startSdk: async () => {
    sdk.started += 1;
    return {
      exporter: {},
      shutdown: async () => {
        sdk.shutdowns += 1;
      },
    };
  },
}));
vi.resetModules();
const { startTracing } = await import('../../src/shared/tracing/start.js');

const settings = { url: 'http://127.0.0.1:4318/v1/traces', role: 'worker' } as TracingSettings;

describe('the process tracing SDK', () => {
  it('is started by the first holder, shared by the next, and shut down only when the last lets go (each hold released once)', async () => {
    expect(await startTracing(undefined)).toBeUndefined();
    const [first, second] = await Promise.all([startTracing(settings), startTracing(settings)]);
    expect(sdk.started).toBe(1);
    await first!.shutdown();
    await first!.shutdown();
    expect(sdk.shutdowns).toBe(0);
    await second!.shutdown();
    expect(sdk.shutdowns).toBe(1);
    // Stopped: the next start makes a new one.
    const third = await startTracing(settings);
    expect(sdk.started).toBe(2);
    await third!.shutdown();
    expect(sdk.shutdowns).toBe(2);
  });
});
