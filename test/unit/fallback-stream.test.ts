import type { LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { streamText } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { readStreamHead } from '../../src/worker/agent/stream/stream-head.js';
import { mockChain } from '../helpers/mock-chain.js';
import { sampleValue } from '../helpers/prom.js';

/**
 * A streamed model call (a turn's step) over a fallback chain, built as a worker builds it
 * (test/helpers/mock-chain.ts), with `ai/test` models as the providers' models.
 */

type Part = LanguageModelV4StreamPart;
type Scripted = Part[] | ((options: LanguageModelV4CallOptions) => ReadableStream<Part>);

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 2, text: 2, reasoning: 0 },
};
const opening = (name: string): Part[] => [
  { type: 'stream-start', warnings: [] },
  { type: 'response-metadata', id: `r-${name}`, modelId: `${name}-2026-01-01` },
  // A provider's own metadata before any content (Anthropic's message_start).
  { type: 'custom', kind: 'mock.message_start', providerMetadata: { mock: { id: `r-${name}` } } },
];
const text = (t: string): Part[] => [
  { type: 'text-start', id: 't' },
  { type: 'text-delta', id: 't', delta: t },
  { type: 'text-end', id: 't' },
];
const finish: Part = { type: 'finish', usage, finishReason: { unified: 'stop', raw: 'stop' } };
/** An error part as the provider packages send it inside a stream (createProviderStreamError). */
const streamError = (statusCode: number, type: string): Part => ({
  type: 'error',
  error: { message: `${type} (${statusCode})`, type, statusCode, isRetryable: statusCode >= 429 },
});
const answer = (name: string): Part[] => [...opening(name), ...text(name), finish];

/** Parts in order, then (optionally) the stream fails with `thenThrow`. */
function partsThen(parts: Part[], thenThrow?: unknown): ReadableStream<Part> {
  let i = 0;
  return new ReadableStream<Part>({
    pull(c) {
      if (i < parts.length) c.enqueue(parts[i++]!);
      else if (thenThrow !== undefined) c.error(thenThrow);
      else c.close();
    },
  });
}

/** A provider model whose n-th call streams `calls[n]` (the last one repeats). */
function model(name: string, ...calls: Scripted[]) {
  let n = 0;
  return new MockLanguageModelV4({
    modelId: name,
    doStream: async (options) => {
      const call = calls[Math.min(n++, calls.length - 1)]!;
      return { stream: typeof call === 'function' ? call(options) : partsThen(call) };
    },
  });
}

const chain = mockChain;

/** One streamed call as a turn makes it: the step's text, model and the error parts that reached it. */
async function step(model: ReturnType<typeof mockChain>['model']) {
  const result = streamText({ model, prompt: 'hi', maxRetries: 0, onError: () => undefined });
  const errors: unknown[] = [];
  let deltas = '';
  for await (const part of result.fullStream) {
    if (part.type === 'error') errors.push(part.error);
    if (part.type === 'text-delta') deltas += part.text;
  }
  const steps = await Promise.resolve(result.steps).catch(() => []);
  return { deltas, errors, models: steps.map((s) => s.response.modelId) };
}

const id = (name: string) => `openai-compatible:${name}`;

describe('a streamed call over LLM_FALLBACK_MODELS', () => {
  it('moves to the next model on an error part before any content; the step names that model and the first is shown down', async () => {
    const overloaded = [...opening('first'), streamError(529, 'overloaded_error'), finish];
    const first = model('first', overloaded, answer('first'));
    const second = model('second', answer('second'));
    const { model: m, health, metrics } = chain([first, second]);

    expect(await step(m)).toEqual({ deltas: 'second', errors: [], models: [id('second')] });
    expect(health.models()[id('first')]).toMatchObject({ status: 'failing', kind: 'server' });
    expect(health.models()[id('second')]).toEqual({ status: 'ok' });
    const exposition = await metrics.registry.metrics();
    expect(sampleValue(exposition, 'chatlane_model_fallbacks_total', { model: id('first') })).toBe(1);
    expect(sampleValue(exposition, 'chatlane_model_up', { model: id('first') })).toBe(0);
    expect(sampleValue(exposition, 'chatlane_model_up', { model: id('second') })).toBe(1);
    // The call's tokens are the model's that answered, by its configured name.
    expect(
      sampleValue(exposition, 'chatlane_model_tokens_total', { model: id('second'), kind: 'input' }),
    ).toBe(3);
    expect(
      sampleValue(exposition, 'chatlane_model_tokens_total', { model: id('first'), kind: 'input' }),
    ).toBe(undefined);

    // The next call starts at the first model again, which is back (and shown up again).
    expect((await step(m)).models).toEqual([id('first')]);
    expect(first.doStreamCalls).toHaveLength(2);
    expect(health.models()[id('first')]).toEqual({ status: 'ok' });
  });

  it('hands a failure after the first content part through unchanged: no second model, the error reaches the step', async () => {
    const first = model('first', [
      ...opening('first'),
      ...text('half a rep'),
      streamError(503, 'api_error'),
      finish,
    ]);
    const second = model('second', answer('second'));
    const { model: m, metrics } = chain([first, second]);

    const out = await step(m);
    expect(out.deltas).toBe('half a rep');
    expect(out.errors).toHaveLength(1);
    expect(out.errors[0]).toMatchObject({ statusCode: 503 });
    expect(second.doStreamCalls).toHaveLength(0);
    const exposition = await metrics.registry.metrics();
    expect(sampleValue(exposition, 'chatlane_model_fallbacks_total', { model: id('first') })).toBe(undefined);
  });

  it('does not fall back on a refusal (400) before content: the error part reaches the step as sent', async () => {
    const first = model('first', [...opening('first'), streamError(400, 'invalid_request_error'), finish]);
    const second = model('second', answer('second'));
    const { model: m, health } = chain([first, second]);

    const out = await step(m);
    expect(out.deltas).toBe('');
    expect(out.errors).toEqual([expect.objectContaining({ statusCode: 400 })]);
    expect(second.doStreamCalls).toHaveLength(0);
    expect(health.models()[id('first')]).toEqual({ status: 'ok' });
  });

  it('moves on when the stream breaks before content (a dropped connection), and shows that model down', async () => {
    const dropped = Object.assign(new TypeError('terminated'), {
      cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }),
    });
    const first = model('first', () => partsThen(opening('first'), dropped));
    const { model: m, health } = chain([first, model('second', answer('second'))]);

    expect(await step(m)).toEqual({ deltas: 'second', errors: [], models: [id('second')] });
    expect(health.models()[id('first')]).toMatchObject({ status: 'failing', kind: 'network' });
  });

  it('moves on when an opened stream sends nothing within the model’s own deadline, and aborts it', async () => {
    const hangs = (options: LanguageModelV4CallOptions) => {
      const signal = options.abortSignal;
      return new ReadableStream<Part>({
        start(c) {
          for (const p of opening('first')) c.enqueue(p);
          signal?.addEventListener('abort', () => c.error(signal.reason));
        },
      });
    };
    const first = model('first', hangs);
    const { model: m, health } = chain([first, model('second', answer('second'))], 50);

    expect((await step(m)).models).toEqual([id('second')]);
    expect(first.doStreamCalls[0]?.abortSignal?.aborted).toBe(true);
    expect(health.models()[id('first')]).toMatchObject({ status: 'failing', kind: 'timeout' });
  });

  it('retries a 429 error part on the same model before moving on', async () => {
    const limited = [...opening('first'), streamError(429, 'rate_limit_error'), finish];
    const first = model('first', limited, answer('first'));
    const second = model('second', answer('second'));
    const { model: m } = chain([first, second]);

    expect((await step(m)).models).toEqual([id('first')]);
    expect(first.doStreamCalls).toHaveLength(2);
    expect(second.doStreamCalls).toHaveLength(0);
  });

  it("hands the last model's error part on when every model is out", async () => {
    const out = (name: string) => model(name, [...opening(name), streamError(503, 'api_error'), finish]);
    const { model: m } = chain([out('a'), out('b')]);
    const result = await step(m);
    expect(result.errors).toEqual([expect.objectContaining({ statusCode: 503 })]);
    expect(result.deltas).toBe('');
  });
});

describe('readStreamHead', () => {
  it('hands on every part in order after the head, and a cancel reaches the model’s stream', async () => {
    const parts = answer('m');
    const head = await readStreamHead(partsThen(parts));
    expect(head.failed).toBe(false);
    const seen: Part[] = [];
    for await (const p of head.stream) seen.push(p);
    expect(seen).toEqual(parts);

    let cancelled: unknown;
    const source = new ReadableStream<Part>({
      start(c) {
        for (const p of answer('m')) c.enqueue(p);
      },
      cancel(reason) {
        cancelled = reason;
      },
    });
    const reader = (await readStreamHead(source)).stream.getReader();
    await reader.read();
    await reader.cancel('turn stopped');
    expect(cancelled).toBe('turn stopped');
  });

  it('hands a thrown failure on after the parts read before it', async () => {
    const boom = new Error('boom');
    const head = await readStreamHead(partsThen(opening('m'), boom));
    expect(head).toMatchObject({ failed: true, error: boom, thrown: true });
    const reader = head.stream.getReader();
    for (const part of opening('m')) expect((await reader.read()).value).toEqual(part);
    await expect(reader.read()).rejects.toBe(boom);
  });
});
