import { APICallError, generateText } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/shared/metrics.js';
import { isOutage, isRateLimit } from '../../src/worker/agent/failure.js';
import { FallbackModel, type FallbackPolicy } from '../../src/worker/agent/fallback-model.js';
import { ModelHealth } from '../../src/worker/agent/model-health.js';
import { sampleValue } from '../helpers/prom.js';
import { untilAborted } from '../helpers/scripted-model.js';

type CallOptions = Parameters<MockLanguageModelV4['doGenerate']>[0];

const apiError = (statusCode: number, headers: Record<string, string> = {}) =>
  new APICallError({
    message: `status ${statusCode}`,
    url: 'http://model.invalid/v1',
    requestBodyValues: {},
    statusCode,
    responseHeaders: headers,
    isRetryable: statusCode === 429 || statusCode >= 500,
  });

const answer = (text: string) => ({
  content: [{ type: 'text' as const, text }],
  finishReason: { unified: 'stop' as const, raw: 'stop' },
  usage: {
    inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 1, text: 1, reasoning: 0 },
  },
  warnings: [],
});

/** A model that fails with `errors` in turn, then answers its name. */
function model(name: string, ...errors: unknown[]) {
  let calls = 0;
  return new MockLanguageModelV4({
    modelId: name,
    doGenerate: async (options: CallOptions) => {
      const err = errors[calls++];
      if (err === 'hang') return untilAborted(options);
      if (err) throw err;
      return answer(name);
    },
  });
}

function chain(models: MockLanguageModelV4[], policy: Partial<FallbackPolicy> = {}) {
  const moves: string[] = [];
  const fallback = new FallbackModel(
    models,
    models.map((m) => m.modelId),
    {
      isOutage,
      isRateLimit,
      retryDelayMs: 1,
      onFallback: (from, to) => moves.push(`${from}->${to}`),
      ...policy,
    },
  );
  return { fallback, moves };
}

const run = (model: FallbackModel, abortSignal?: AbortSignal) =>
  generateText({ model, prompt: 'hi', maxRetries: 0, abortSignal }).then(
    (r) => r.text,
    (e: unknown) => e,
  );

describe('FallbackModel (LLM_FALLBACK_MODELS)', () => {
  it('moves a call that hit a 5xx to the next model, and the next call starts at the first again', async () => {
    const first = model('first', apiError(503));
    const second = model('second');
    const { fallback, moves } = chain([first, second]);
    expect(await run(fallback)).toBe('second');
    expect(moves).toEqual(['first->second']);
    expect(await run(fallback)).toBe('first');
    expect(first.doGenerateCalls).toHaveLength(2);
    expect(second.doGenerateCalls).toHaveLength(1);
  });

  it('retries a 429 on the same model twice, waiting what its answer asks, before falling back', async () => {
    // A wait long enough to see: the retry honours the 429's retry-after-ms, not the policy's 1 ms.
    const first = model('first', apiError(429, { 'retry-after-ms': '300' }), apiError(429), apiError(429));
    const { fallback, moves } = chain([first, model('second')]);
    const started = performance.now();
    expect(await run(fallback)).toBe('second');
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(first.doGenerateCalls).toHaveLength(3);
    expect(moves).toEqual(['first->second']);

    const recovering = model('first', apiError(429));
    const second = chain([recovering, model('second')]);
    expect(await run(second.fallback)).toBe('first');
    expect(second.moves).toEqual([]);
  });

  it('falls back on a refused connection and on a model call past its own deadline', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    expect(await run(chain([model('first', refused), model('second')]).fallback)).toBe('second');

    const hung = model('first', 'hang');
    const { fallback, moves } = chain([hung, model('second')], { attemptTimeoutMs: 50 });
    expect(await run(fallback)).toBe('second');
    expect(moves).toEqual(['first->second']);
    // The hung call was aborted, not left running.
    expect(hung.doGenerateCalls[0]?.abortSignal?.aborted).toBe(true);
  });

  it('does not fall back on a refused message (400), bad credentials (401) or an unknown model (404)', async () => {
    for (const status of [400, 401, 404]) {
      const second = model('second');
      const { fallback, moves } = chain([model('first', apiError(status)), second]);
      const err = await run(fallback);
      expect(APICallError.isInstance(err) && err.statusCode).toBe(status);
      expect(second.doGenerateCalls).toHaveLength(0);
      expect(moves).toEqual([]);
    }
  });

  it('does not fall back once the turn is ended: the abort is thrown as is', async () => {
    const ended = new AbortController();
    const second = model('second');
    const { fallback } = chain([model('first', 'hang'), second]);
    const pending = run(fallback, ended.signal);
    ended.abort(new Error('lane lost'));
    expect(await pending).toMatchObject({ message: 'lane lost' });
    expect(second.doGenerateCalls).toHaveLength(0);
  });

  it("throws the last model's error when every model is out", async () => {
    const { fallback, moves } = chain([
      model('a', apiError(503)),
      model('b', apiError(502)),
      model('c', apiError(500)),
    ]);
    const err = await run(fallback);
    expect(APICallError.isInstance(err) && err.statusCode).toBe(500);
    expect(moves).toEqual(['a->b', 'b->c']);
  });
});

describe('ModelHealth per model', () => {
  it("marks a model down on its endpoint's errors only, and up again on its next success", () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const health = new ModelHealth(metrics, ['openai:a', 'anthropic:b']);
    expect(health.models()).toEqual({ 'openai:a': { status: 'ok' }, 'anthropic:b': { status: 'ok' } });

    health.callFailed('openai:a', apiError(400));
    expect(health.models()['openai:a']).toEqual({ status: 'ok' });
    health.callFailed('openai:a', apiError(503), Date.parse('2026-11-26T07:00:00Z'));
    health.callFailed('openai:a', apiError(503));
    expect(health.models()['openai:a']).toMatchObject({
      status: 'failing',
      kind: 'server',
      failures: 2,
      since: '2026-11-26T07:00:00.000Z',
    });
    return metrics.registry.metrics().then((text) => {
      expect(sampleValue(text, 'chatlane_model_up', { model: 'openai:a' })).toBe(0);
      expect(sampleValue(text, 'chatlane_model_up', { model: 'anthropic:b' })).toBe(1);
      health.served('openai:a');
      expect(health.models()['openai:a']).toEqual({ status: 'ok' });
    });
  });
});
