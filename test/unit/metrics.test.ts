import { generateText, type LanguageModel, streamText } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { DelayedError, type Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEFAULT_METRICS_PORT, loadConfig } from '../../src/shared/config.js';
import {
  createMetrics,
  exportsQueueMetrics,
  mergeExpositions,
  recordCompactionRun,
  recordDeliveryFailure,
} from '../../src/shared/metrics.js';
import { parsePriceFile } from '../../src/shared/prices.js';
import { meteredModel } from '../../src/worker/agent/model-metrics.js';
import { instrumentTurnProcessor } from '../../src/worker/turn/instrument.js';
import { duplicateFamilies, sampleValue } from '../helpers/prom.js';
import { scriptedModel, usage } from '../helpers/scripted-model.js';

const job = (over: Partial<Job> = {}) =>
  ({ timestamp: 1000, processedOn: 3500, attemptsStarted: 1, ...over }) as Job;

const scrape = (metrics: ReturnType<typeof createMetrics>) => metrics.registry.metrics();

describe('meteredModel', () => {
  it('times every model call by result, counts the tokens it used, and passes the model through unchanged', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    let calls = 0;
    const inner = new MockLanguageModelV4({
      provider: 'mock-provider',
      modelId: 'mock-model',
      supportedUrls: { 'image/*': [/^https:/] },
      doGenerate: async () => {
        calls++;
        if (calls === 2) throw new Error('model down');
        return {
          content: [{ type: 'text', text: 'hi' }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage,
          warnings: [],
        };
      },
    });
    const model = meteredModel(inner, metrics);
    if (typeof model === 'string') throw new Error('not a model object');
    expect([model.provider, model.modelId]).toEqual(['mock-provider', 'mock-model']);
    expect(await model.supportedUrls).toEqual({ 'image/*': [/^https:/] });
    expect((await generateText({ model, prompt: 'hello', maxRetries: 0 })).text).toBe('hi');
    await expect(generateText({ model, prompt: 'hello', maxRetries: 0 })).rejects.toThrow('model down');
    expect(inner.doGenerateCalls).toHaveLength(2);
    const text = await scrape(metrics);
    expect(sampleValue(text, 'chatlane_model_call_duration_seconds_count', { result: 'ok' })).toBe(1);
    expect(sampleValue(text, 'chatlane_model_call_duration_seconds_count', { result: 'error' })).toBe(1);
    expect(sampleValue(text, 'chatlane_model_tokens_total', { kind: 'input' })).toBe(10);
    expect(sampleValue(text, 'chatlane_model_tokens_total', { kind: 'output' })).toBe(5);
    expect(meteredModel('some-model-id', metrics)).toBe('some-model-id');
  });

  it('counts tokens by the configured model (not the dated version a provider names) and by kind, and their cost at the price file', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const inner = new MockLanguageModelV4({
      modelId: 'configured',
      doGenerate: async () => ({
        content: [{ type: 'text', text: 'hi' }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: {
          inputTokens: { total: 1000, noCache: 100, cacheRead: 800, cacheWrite: 100 },
          outputTokens: { total: 300, text: 100, reasoning: 200 },
        },
        response: { modelId: 'served-2026-01-01' },
        warnings: [],
      }),
    });
    const prices = parsePriceFile(
      'models:\n  configured: { input: 2, cached_input: 0.5, cache_write: 4, output: 10 }\n',
    );
    if (typeof prices === 'string') throw new Error(prices);
    const model = meteredModel(inner, metrics, prices);
    await generateText({ model, prompt: 'hello', maxRetries: 0 });
    const text = await scrape(metrics);
    const tokens = (kind: string) =>
      sampleValue(text, 'chatlane_model_tokens_total', { model: 'configured', kind });
    expect([
      tokens('input'),
      tokens('cached_input'),
      tokens('cache_write'),
      tokens('output'),
      tokens('reasoning'),
    ]).toEqual([1000, 800, 100, 300, 200]);
    expect(
      sampleValue(text, 'chatlane_model_tokens_total', { model: 'served-2026-01-01', kind: 'input' }),
    ).toBeUndefined();
    // 100 full-price input × $2 + 800 cached × $0.5 + 100 written × $4 + 300 output × $10, per million.
    const cost = sampleValue(text, 'chatlane_model_cost_usd_total', { model: 'configured' });
    expect(cost).toBeCloseTo((100 * 2 + 800 * 0.5 + 100 * 4 + 300 * 10) / 1e6, 12);
  });

  it('times a streamed call until its stream ends and counts the usage of its finish part; a failed one as an error', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const { model: inner } = scriptedModel((_prompt, call) => {
      if (call === 1) throw new Error('model down');
      return { text: 'streamed' };
    });
    const model = meteredModel(inner, metrics);
    expect(await streamText({ model, prompt: 'hello', maxRetries: 0 }).text).toBe('streamed');
    await streamText({ model, prompt: 'hello', maxRetries: 0, onError: () => undefined }).consumeStream({
      onError: () => undefined,
    });
    const text = await scrape(metrics);
    expect(sampleValue(text, 'chatlane_model_call_duration_seconds_count', { result: 'ok' })).toBe(1);
    expect(sampleValue(text, 'chatlane_model_call_duration_seconds_count', { result: 'error' })).toBe(1);
    expect(sampleValue(text, 'chatlane_model_tokens_total', { model: inner.modelId, kind: 'input' })).toBe(
      10,
    );
    expect(sampleValue(text, 'chatlane_model_tokens_total', { model: inner.modelId, kind: 'output' })).toBe(
      5,
    );
  });

  it('meters a model that throws before returning a promise as a failed call, and rejects', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    // Not MockLanguageModelV4: it wraps doGenerate in an async function, so nothing it is given throws.
    const throwing = () => {
      throw new Error('bad request');
    };
    const inner: LanguageModel = {
      specificationVersion: 'v4',
      provider: 'p',
      modelId: 'm',
      supportedUrls: {},
      doGenerate: throwing,
      doStream: throwing,
    };
    const model = meteredModel(inner, metrics);
    if (typeof model === 'string' || model.specificationVersion !== 'v4') throw new Error('not a v4 model');
    const call = model.doGenerate({ prompt: [] });
    await expect(call).rejects.toThrow('bad request');
    const text = await scrape(metrics);
    expect(sampleValue(text, 'chatlane_model_call_duration_seconds_count', { result: 'error' })).toBe(1);
  });
});

describe('instrumentTurnProcessor', () => {
  it('observes turn duration by the outcome the processor returned, and a lost turn as a fence rejection', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const outcomes = ['done', 'idle', 'lost', 'lost'];
    const run = instrumentTurnProcessor(async () => ({ status: outcomes.shift() }), metrics, 'turns');
    for (let i = 0; i < 4; i++) await run(job());
    const text = await scrape(metrics);
    expect(sampleValue(text, 'chatlane_turn_duration_seconds_count', { outcome: 'done' })).toBe(1);
    expect(sampleValue(text, 'chatlane_turn_duration_seconds_count', { outcome: 'idle' })).toBe(1);
    expect(sampleValue(text, 'chatlane_turn_duration_seconds_count', { outcome: 'lost' })).toBe(2);
    expect(sampleValue(text, 'chatlane_fence_rejections_total')).toBe(2);
  });

  it('counts a DelayedError as busy and any other error as failed, and rethrows both', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const busy = instrumentTurnProcessor(
      async () => {
        throw new DelayedError();
      },
      metrics,
      'turns',
    );
    const failing = instrumentTurnProcessor(
      async () => {
        throw new Error('model down');
      },
      metrics,
      'turns',
    );
    await expect(busy(job())).rejects.toBeInstanceOf(DelayedError);
    await expect(failing(job())).rejects.toThrow('model down');
    const text = await scrape(metrics);
    expect(sampleValue(text, 'chatlane_turn_duration_seconds_count', { outcome: 'busy' })).toBe(1);
    expect(sampleValue(text, 'chatlane_turn_duration_seconds_count', { outcome: 'failed' })).toBe(1);
    expect(sampleValue(text, 'chatlane_fence_rejections_total')).toBe(0);
  });

  it('counts a processor that throws before returning a promise as failed, and rejects', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const run = instrumentTurnProcessor(
      (): Promise<unknown> => {
        throw new Error('bad job');
      },
      metrics,
      'turns',
    );
    const turn = run(job());
    await expect(turn).rejects.toThrow('bad job');
    const text = await scrape(metrics);
    expect(sampleValue(text, 'chatlane_turn_duration_seconds_count', { outcome: 'failed' })).toBe(1);
  });

  it('observes queue wait from job.timestamp to job.processedOn on the first start only', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const run = instrumentTurnProcessor(async () => ({ status: 'done' }), metrics, 'turns');
    await run(job({ timestamp: 1000, processedOn: 3500, attemptsStarted: 1 }));
    await run(job({ timestamp: 1000, processedOn: 90_000, attemptsStarted: 2 }));
    const text = await scrape(metrics);
    expect(sampleValue(text, 'chatlane_queue_wait_seconds_count', { queue: 'turns' })).toBe(1);
    expect(sampleValue(text, 'chatlane_queue_wait_seconds_sum', { queue: 'turns' })).toBe(2.5);
  });
});

describe('compaction and delivery helpers', () => {
  it('count compaction runs by result and tokens saved only for applied runs', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    recordCompactionRun(metrics, 'applied', 1200);
    recordCompactionRun(metrics, 'conflict', 999);
    recordCompactionRun(metrics, 'applied', 300);
    recordDeliveryFailure(metrics, 'telegram');
    const text = await scrape(metrics);
    expect(sampleValue(text, 'chatlane_compaction_runs_total', { result: 'applied' })).toBe(2);
    expect(sampleValue(text, 'chatlane_compaction_runs_total', { result: 'conflict' })).toBe(1);
    expect(sampleValue(text, 'chatlane_compaction_tokens_saved_total')).toBe(1500);
    expect(sampleValue(text, 'chatlane_delivery_failures_total', { channel: 'telegram' })).toBe(1);
  });
});

describe('mergeExpositions', () => {
  it('keeps one HELP and TYPE per family and groups the samples of several queues under it', () => {
    const queue = (name: string, n: number) =>
      [
        '# HELP bullmq_job_count Number of jobs in the queue by state',
        '# TYPE bullmq_job_count gauge',
        `bullmq_job_count{queue="${name}", state="waiting"} ${n}`,
        '# HELP bullmq_job_failed_total Total number of failed jobs',
        '# TYPE bullmq_job_failed_total counter',
        `bullmq_job_failed_total{queue="${name}"} 0`,
      ].join('\n');
    const merged = mergeExpositions([queue('turns', 3), queue('compaction', 1)]);
    expect(duplicateFamilies(merged)).toEqual([]);
    expect(merged.split('\n')).toEqual([
      '# HELP bullmq_job_count Number of jobs in the queue by state',
      '# TYPE bullmq_job_count gauge',
      'bullmq_job_count{queue="turns", state="waiting"} 3',
      'bullmq_job_count{queue="compaction", state="waiting"} 1',
      '# HELP bullmq_job_failed_total Total number of failed jobs',
      '# TYPE bullmq_job_failed_total counter',
      'bullmq_job_failed_total{queue="turns"} 0',
      'bullmq_job_failed_total{queue="compaction"} 0',
    ]);
  });
});

describe('operations config', () => {
  it('defaults: no board credentials, read-write board, metrics port left to the process (9100 if free)', () => {
    const config = loadConfig({});
    expect(config.ADMIN_USER).toBeUndefined();
    expect(config.ADMIN_PASSWORD).toBeUndefined();
    expect(config.ADMIN_READ_ONLY).toBe(false);
    // Unset stays unset, so a worker knows it may fall back to a free port.
    expect(config.METRICS_PORT).toBeUndefined();
    expect(loadConfig({ METRICS_PORT: ' ' }).METRICS_PORT).toBeUndefined();
    expect(DEFAULT_METRICS_PORT).toBe(9100);
    expect(loadConfig({ METRICS_PORT: '9100' }).METRICS_PORT).toBe(9100);
  });

  it('parses ADMIN_READ_ONLY as a boolean and METRICS_PORT 0 as any free port', () => {
    expect(loadConfig({ ADMIN_READ_ONLY: 'true' }).ADMIN_READ_ONLY).toBe(true);
    expect(loadConfig({ ADMIN_READ_ONLY: '0' }).ADMIN_READ_ONLY).toBe(false);
    expect(loadConfig({ METRICS_PORT: '0' }).METRICS_PORT).toBe(0);
  });

  it('QUEUE_METRICS: unset, only the ingress exports queue-wide metrics; set, it decides for this process', () => {
    const unset = loadConfig({}).QUEUE_METRICS;
    expect(unset).toBeUndefined();
    expect(exportsQueueMetrics(unset, 'ingress')).toBe(true);
    expect(exportsQueueMetrics(unset, 'worker')).toBe(false);
    expect(exportsQueueMetrics(unset, 'compactor')).toBe(false);
    const on = loadConfig({ QUEUE_METRICS: 'true' }).QUEUE_METRICS;
    const off = loadConfig({ QUEUE_METRICS: '0' }).QUEUE_METRICS;
    expect(exportsQueueMetrics(on, 'worker')).toBe(true);
    expect(exportsQueueMetrics(off, 'ingress')).toBe(false);
  });

  it.each([
    ['QUEUE_METRICS', 'sometimes'],
    ['ADMIN_READ_ONLY', 'yes please'],
    ['METRICS_PORT', '70000'],
    ['METRICS_PORT', '-1'],
  ])('refuses %s=%s naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(name));
  });
});
