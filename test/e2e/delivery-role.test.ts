import { describe, expect, it } from 'vitest';
import { GENERIC_CHANNEL } from '../../src/shared/delivery/generic-sender.js';
import { createQueue, QUEUES } from '../../src/shared/jobs.js';
import { startRole } from '../helpers/processes.js';
import { useStack } from '../helpers/stack.js';
import { crmSourceEnv, webhookSecret } from '../helpers/webhooks.js';

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
    const { DELIVERY_IN_WORKER: _inWorker, ...crm } = crmSourceEnv(webhookSecret());
    const worker = await stack.start('worker', { ...crm, DELIVERY_IN_WORKER: 'false' });
    expect(worker.logs.find((l) => l.msg === 'worker started')?.delivery).toBe('off');
    const other = await stack.start('worker', crm);
    expect(other.logs.find((l) => l.msg === 'worker started')?.delivery).toEqual({
      concurrency: 64,
      channels: [GENERIC_CHANNEL],
    });
    await Promise.all([worker.kill('SIGTERM'), other.kill('SIGTERM')]);
  });

  it('a worker with no platform and no signed webhook configured runs no delivery worker', async () => {
    const worker = await stack.start('worker');
    expect(worker.logs.find((l) => l.msg === 'worker started')?.delivery).toBe(
      'off: no platform or signed webhook configured in this process',
    );
    // Nothing of it polls the deliveries queue: BullMQ lists the connections that do.
    const deliveries = createQueue(stack.prefix, QUEUES.deliveries, stack.redis);
    const turns = createQueue(stack.prefix, QUEUES.turns, stack.redis);
    try {
      expect(await turns.getWorkersCount()).toBe(1);
      expect(await deliveries.getWorkersCount()).toBe(0);
    } finally {
      await Promise.all([deliveries.close(), turns.close()]);
    }
  });
});
