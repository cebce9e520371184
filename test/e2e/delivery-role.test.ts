import { describe, expect, it } from 'vitest';
import { startRole } from '../helpers/processes.js';
import { useStack } from '../helpers/stack.js';

describe('chatlane delivery', () => {
  const stack = useStack('e2e-delivery-role', { roles: [] });

  it('starts without a model, serves readiness on its side port and stops cleanly on SIGTERM', async () => {
    const { LLM_BASE_URL: _url, LLM_MODEL: _model, ...env } = stack.env;
    const proc = await startRole('delivery', { ...env, LLM_BASE_URL: '', LLM_MODEL: '' });
    const started = proc.logs.find((l) => l.msg === 'delivery started');
    expect(started).toMatchObject({ concurrency: 64 });
    const ready = await fetch(`${String(started?.metricsUrl).replace('0.0.0.0', '127.0.0.1')}/readyz`);
    expect(await ready.json()).toEqual({ status: 'ready', role: 'delivery' });
    const exited = new Promise<number | null>((resolve) => proc.child.once('exit', resolve));
    await proc.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('a worker with DELIVERY_IN_WORKER=false leaves delivery to the delivery processes', async () => {
    const worker = await stack.start('worker', { DELIVERY_IN_WORKER: 'false' });
    expect(worker.logs.find((l) => l.msg === 'worker started')?.delivery).toBe('off');
    const other = await stack.start('worker');
    expect(other.logs.find((l) => l.msg === 'worker started')?.delivery).toMatchObject({ concurrency: 64 });
  });
});
