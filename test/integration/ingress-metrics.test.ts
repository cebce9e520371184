import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { type OpsIngress, opsIngress } from '../helpers/ops-ingress.js';
import { duplicateFamilies, parseSamples, sampleValue } from '../helpers/prom.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

const redis = testRedis('ingress');
let prefix: string;
let ing: OpsIngress;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('metrics');
  ing = await opsIngress(redis, prefix);
});
afterEach(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const post = (chatKey: string, payload: string, headers: Record<string, string> = {}) =>
  ing.app.inject({
    method: 'POST',
    url: `/v1/chats/${chatKey}/messages`,
    headers: { 'content-type': 'application/json', ...headers },
    payload,
  });

const API_TOKEN = 'an-api-token-of-at-least-32-characters';
const METRICS_TOKEN = 'a-metrics-token-of-at-least-32-chars';

/** /metrics as Prometheus reads it: with METRICS_TOKEN (ignored while /v1 is open). */
const scrape = async () => {
  const res = await ing.app.inject({
    method: 'GET',
    url: '/metrics',
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.body;
};

describe('GET /metrics on the ingress', () => {
  it('observes request duration by route pattern and status, never by raw URL', async () => {
    expect((await post('alice', JSON.stringify({ id: 'm1', text: 'hi' }))).statusCode).toBe(202);
    expect((await post('bob', JSON.stringify({ id: 'm2', text: 'hi' }))).statusCode).toBe(202);
    expect((await ing.app.inject({ method: 'GET', url: '/no/such/thing' })).statusCode).toBe(404);

    const text = await scrape();
    const count = sampleValue(text, 'chatlane_http_request_duration_seconds_count', {
      method: 'POST',
      route: '/v1/chats/:chatKey/messages',
      status: '202',
    });
    expect(count).toBe(2);
    expect(
      sampleValue(text, 'chatlane_http_request_duration_seconds_count', {
        route: 'unmatched',
        status: '404',
      }),
    ).toBe(1);
    const routes = new Set(
      parseSamples(text)
        .filter((s) => s.name.startsWith('chatlane_http_request_duration_seconds'))
        .map((s) => s.labels.route),
    );
    expect([...routes].some((r) => r?.includes('alice') || r?.includes('/no/such'))).toBe(false);
  });

  it('counts accepted, duplicate and rejected messages, rejections by error code', async () => {
    await post('alice', JSON.stringify({ id: 'm1', text: 'hi' }));
    await post('alice', JSON.stringify({ id: 'm1', text: 'hi' }));
    await post('alice', JSON.stringify({ id: 'm2', text: 'hi' }));
    expect((await post('alice', '{"text": ')).statusCode).toBe(400);
    expect((await post('alice', JSON.stringify({ id: 'm3', text: 'over the cap of 2' }))).statusCode).toBe(
      429,
    );
    expect((await post('bad{key', JSON.stringify({ text: 'x' }))).statusCode).toBe(400);

    const text = await scrape();
    expect(sampleValue(text, 'chatlane_messages_total', { result: 'accepted' })).toBe(2);
    expect(sampleValue(text, 'chatlane_messages_total', { result: 'duplicate' })).toBe(1);
    expect(sampleValue(text, 'chatlane_messages_total', { result: 'rejected', reason: 'INVALID_JSON' })).toBe(
      1,
    );
    expect(sampleValue(text, 'chatlane_messages_total', { result: 'rejected', reason: 'CHAT_FULL' })).toBe(1);
    expect(
      sampleValue(text, 'chatlane_messages_total', { result: 'rejected', reason: 'INVALID_CHAT_KEY' }),
    ).toBe(1);
  });

  it('counts a refused bearer token as a rejection with reason UNAUTHORIZED', async () => {
    await ing.close();
    ing = await opsIngress(redis, prefix, { apiToken: API_TOKEN, security: { metricsToken: METRICS_TOKEN } });
    expect((await post('alice', JSON.stringify({ text: 'hi' }))).statusCode).toBe(401);
    const text = await scrape();
    expect(sampleValue(text, 'chatlane_messages_total', { result: 'rejected', reason: 'UNAUTHORIZED' })).toBe(
      1,
    );
    expect(sampleValue(text, 'chatlane_messages_total', { result: 'accepted' })).toBeUndefined();
  });

  it("appends BullMQ's queue depth by state for every queue, read at scrape time", async () => {
    const before = await scrape();
    expect(sampleValue(before, 'bullmq_job_count', { queue: 'turns', state: 'waiting' })).toBe(0);

    await post('alice', JSON.stringify({ id: 'm1', text: 'hi' }));
    await post('bob', JSON.stringify({ id: 'm2', text: 'hi' }));
    const text = await scrape();
    expect(sampleValue(text, 'bullmq_job_count', { queue: 'turns', state: 'waiting' })).toBe(2);
    for (const queue of ['compaction', 'deliveries', 'maintenance']) {
      expect(sampleValue(text, 'bullmq_job_count', { queue, state: 'waiting' })).toBe(0);
      expect(sampleValue(text, 'chatlane_queue_metrics_up', { queue })).toBe(1);
    }
    // One HELP/TYPE per family even with four queues: a valid exposition.
    expect(duplicateFamilies(text)).toEqual([]);
    // Default process metrics ride along.
    expect(sampleValue(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
  });

  it('still answers when a queue cannot be read, and says so', async () => {
    const [turns] = ing.queues;
    const original = turns!.exportPrometheusMetrics.bind(turns);
    turns!.exportPrometheusMetrics = () => Promise.reject(new Error('redis down'));
    try {
      const text = await scrape();
      expect(sampleValue(text, 'chatlane_queue_metrics_up', { queue: 'turns' })).toBe(0);
      expect(sampleValue(text, 'bullmq_job_count', { queue: 'turns', state: 'waiting' })).toBeUndefined();
      expect(sampleValue(text, 'bullmq_job_count', { queue: 'compaction', state: 'waiting' })).toBe(0);
    } finally {
      turns!.exportPrometheusMetrics = original;
    }
  });

  it('is open while /v1 is (development), like /healthz and /readyz', async () => {
    for (const url of ['/metrics', '/healthz', '/readyz']) {
      expect((await ing.app.inject({ method: 'GET', url })).statusCode, url).toBe(200);
    }
  });
});
