import { afterAll, describe, expect, it } from 'vitest';
import { startIngress } from '../../src/roles/ingress.js';
import { loadConfig } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { sampleValue } from '../helpers/prom.js';
import { deletePrefix, REDIS_ENV, randomPrefix, testRedis } from '../helpers/redis.js';

describe('QUEUE_METRICS on the ingress', () => {
  const redis = testRedis();
  const prefix = randomPrefix('qmetrics');
  const config = (extra: Record<string, string> = {}) =>
    loadConfig({ ...REDIS_ENV, CHATLANE_PREFIX: prefix, HOST: '127.0.0.1', PORT: '0', ...extra });
  const scrape = async (extra: Record<string, string>) => {
    const ingress = await startIngress(config(extra), silentLogger());
    try {
      return await (await fetch(`${ingress.url}/metrics`)).text();
    } finally {
      await ingress.close();
    }
  };
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('unset: the ingress exports every queue, maintenance included', async () => {
    const text = await scrape({});
    for (const queue of ['turns', 'compaction', 'deliveries', 'maintenance']) {
      expect(sampleValue(text, 'bullmq_job_count', { queue, state: 'waiting' }), queue).toBe(0);
      expect(sampleValue(text, 'bullmq_job_completed_total', { queue }), queue).toBeDefined();
    }
  });

  it('false: the ingress leaves them to whichever process has QUEUE_METRICS=true, and still exports its own work', async () => {
    const text = await scrape({ QUEUE_METRICS: 'false' });
    expect(text).not.toContain('bullmq_job_count');
    expect(text).toContain('# TYPE chatlane_messages_total counter');
  });
});
