import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { postMessage, type RoleProcess, startRole } from '../helpers/processes.js';
import { sampleValue } from '../helpers/prom.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/** The real processes: ingress and worker each serve /metrics, /healthz and /readyz. */
describe('operations endpoints of real processes', () => {
  const redis = testRedis();
  const prefix = randomPrefix('e2e-ops');
  const store = new ChatStore(redis, { prefix, maxEvents: 100 });
  let mock: Awaited<ReturnType<typeof startMockLlm>>;
  let ingress: RoleProcess;
  let worker: RoleProcess;
  let metricsUrl: string;

  beforeAll(async () => {
    mock = await startMockLlm({ port: 0 });
    const env = { CHATLANE_PREFIX: prefix, LLM_BASE_URL: mock.url, LLM_MODEL: 'mock', METRICS_PORT: '0' };
    ingress = await startRole('ingress', { ...env, ADMIN_USER: 'ops', ADMIN_PASSWORD: 'a-board-password' });
    worker = await startRole('worker', env);
    const started = worker.logs.find((l) => l.msg === 'worker started');
    metricsUrl = String(started?.metricsUrl);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([ingress?.kill(), worker?.kill()]);
    await mock?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('the worker logs its side-server URL and answers /healthz and /readyz there', async () => {
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${metricsUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${metricsUrl}/readyz`)).status).toBe(200);
  });

  it('after a conversation turn, the worker reports the turn, the model call and its tokens; the ingress the message', async () => {
    await postMessage(ingress.url!, 'alice', 'm1', 'hello');
    await waitFor(async () => (await store.readOutbox('alice', undefined, 10)).length > 0, {
      what: 'the reply',
    });
    const workerText = await waitFor(
      async () => {
        const t = await (await fetch(`${metricsUrl}/metrics`)).text();
        return (sampleValue(t, 'chatlane_turn_duration_seconds_count', { outcome: 'done' }) ?? 0) >= 1 && t;
      },
      { what: 'the worker turn metric' },
    );
    expect(
      sampleValue(workerText, 'chatlane_model_call_duration_seconds_count', { result: 'ok' }),
    ).toBeGreaterThan(0);
    expect(sampleValue(workerText, 'chatlane_model_tokens_total', { kind: 'input' })).toBeGreaterThan(0);
    expect(sampleValue(workerText, 'chatlane_queue_wait_seconds_count', { queue: 'turns' })).toBeGreaterThan(
      0,
    );
    // Its own work only: queue-wide counts come from the ingress.
    expect(sampleValue(workerText, 'bullmq_job_count', { queue: 'turns', state: 'active' })).toBeUndefined();

    const ingressText = await (await fetch(`${ingress.url}/metrics`)).text();
    expect(sampleValue(ingressText, 'chatlane_messages_total', { result: 'accepted' })).toBe(1);
    for (const queue of ['turns', 'compaction', 'deliveries', 'maintenance']) {
      expect(sampleValue(ingressText, 'bullmq_job_count', { queue, state: 'waiting' })).toBeDefined();
    }
  });

  it('the ingress mounts the board from ADMIN_USER/ADMIN_PASSWORD, behind basic auth', async () => {
    expect((await fetch(`${ingress.url}/admin/queues`)).status).toBe(401);
    const ok = await fetch(`${ingress.url}/admin/queues/api/queues`, {
      headers: { authorization: `Basic ${Buffer.from('ops:a-board-password').toString('base64')}` },
    });
    expect(ok.status).toBe(200);
    expect(ingress.logs.some((l) => l.msg === 'Bull Board mounted')).toBe(true);
  });

  it('an ingress without ADMIN_USER/ADMIN_PASSWORD warns and mounts no board', async () => {
    const bare = await startRole('ingress', { CHATLANE_PREFIX: prefix });
    try {
      expect((await fetch(`${bare.url}/admin/queues`)).status).toBe(404);
      expect(bare.logs.some((l) => l.level === 40 && String(l.msg).includes('Bull Board not mounted'))).toBe(
        true,
      );
    } finally {
      await bare.kill();
    }
  });
});
