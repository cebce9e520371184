import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { startWorker } from '../../src/roles/worker.js';
import { ConfigError } from '../../src/shared/config.js';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { userMessage } from '../helpers/messages.js';
import { sampleValue } from '../helpers/prom.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';
import { workerConfig } from '../helpers/worker-config.js';

describe('startWorker and its side server', () => {
  const redis = testRedis();
  const prefix = randomPrefix('startw');
  let mock: Awaited<ReturnType<typeof startMockLlm>>;
  const config = () => workerConfig(prefix, mock.url);

  beforeAll(async () => {
    mock = await startMockLlm({ port: 0 });
  });
  afterAll(async () => {
    await mock?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('serves /readyz on METRICS_PORT while running, and close() shuts the side server with the worker', async () => {
    const handle = await startWorker(config(), silentLogger());
    try {
      expect((await fetch(`${handle.metricsUrl}/readyz`)).status).toBe(200);
      const metrics = await (await fetch(`${handle.metricsUrl}/metrics`)).text();
      expect(metrics).toContain('# TYPE chatlane_turn_duration_seconds histogram');
      // Queue-wide counts are the ingress's to export (QUEUE_METRICS unset): none here.
      expect(metrics).not.toContain('bullmq_job_count');
    } finally {
      await handle.close();
    }
    expect(handle.worker.isRunning()).toBe(false);
    await expect(fetch(`${handle.metricsUrl}/healthz`)).rejects.toThrow();
  });

  it('with QUEUE_METRICS=true exports the queue-wide counts of every queue', async () => {
    const handle = await startWorker({ ...config(), QUEUE_METRICS: true }, silentLogger());
    try {
      const text = await (await fetch(`${handle.metricsUrl}/metrics`)).text();
      for (const queue of ['turns', 'compaction', 'deliveries', 'maintenance']) {
        expect(sampleValue(text, 'bullmq_job_count', { queue, state: 'waiting' }), queue).toBeDefined();
        expect(sampleValue(text, 'bullmq_job_completed_total', { queue }), queue).toBeDefined();
      }
    } finally {
      await handle.close();
    }
  });

  it('refuses to start, and leaves nothing running, when METRICS_PORT is taken', async () => {
    const first = await startWorker(config(), silentLogger());
    try {
      const port = new URL(first.metricsUrl).port;
      const taken = { ...config(), METRICS_PORT: Number(port) };
      await expect(startWorker(taken, silentLogger())).rejects.toThrow(ConfigError);
      await expect(startWorker(taken, silentLogger())).rejects.toThrow(/METRICS_PORT/);
      // The first worker is untouched, and the refused ones left no BullMQ worker behind.
      expect((await fetch(`${first.metricsUrl}/readyz`)).status).toBe(200);
      const turns = createQueue(prefix, QUEUES.turns, redis);
      try {
        expect(await turns.getWorkersCount()).toBe(1);
      } finally {
        await turns.close();
      }
    } finally {
      await first.close();
    }
  });

  it('binds its side server before it takes a job: refused for a taken METRICS_PORT, a queued chat stays pending', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as AddressInfo).port;
    const store = new ChatStore(redis, { prefix, maxEvents: 100 });
    const turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
    try {
      await store.ingest('startup-queued', userMessage('startup-queued', 'q1', 'hello'), {
        maxPending: 10,
        dedupWindowMs: 60_000,
      });
      await enqueueTurn(turns, 'startup-queued');
      await expect(startWorker({ ...config(), METRICS_PORT: port }, silentLogger())).rejects.toThrow(
        `METRICS_PORT: ${port} is already in use`,
      );
      // Had the worker run before binding, the job would be active or done by now.
      const jobId = await turns.getDeduplicationJobId('startup-queued');
      expect(jobId && (await turns.getJobState(jobId))).toBe('waiting');
      expect(await store.pendingCount('startup-queued')).toBe(1);
      expect(mock.state.perChat['startup-queued']).toBeUndefined();
      expect(await turns.getWorkersCount()).toBe(0);
    } finally {
      await turns.obliterate({ force: true });
      await turns.close();
      await new Promise((r) => blocker.close(r));
    }
  });
});
