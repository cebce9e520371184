import { APICallError, DownloadError, RetryError, StreamProviderError } from 'ai';
import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { FileRefusedError } from '../../src/shared/errors.js';
import { classifyTurnError } from '../../src/worker/agent/failure.js';
import { ModelHealth, modelRetryDelay } from '../../src/worker/agent/model-health.js';

const apiError = (statusCode: number | undefined, message = 'error', cause?: unknown) =>
  new APICallError({
    message,
    url: 'http://model/v1/chat/completions',
    requestBodyValues: {},
    statusCode,
    ...(cause !== undefined && { cause }),
  });

const networkError = (code: string) => Object.assign(new Error(`connect ${code}`), { code });

describe('classifying a failed turn', () => {
  it.each([
    [401, 'auth'],
    [403, 'auth'],
    [404, 'not_found'],
    [408, 'timeout'],
    [429, 'rate_limit'],
    [500, 'server'],
    [503, 'server'],
  ])('a provider %i is the model’s (%s): the messages wait', (status, kind) => {
    expect(classifyTurnError(apiError(status))).toEqual({ kind: 'model', errorKind: kind });
  });

  it('connection refused, DNS failure and a step timeout are the model’s, however the SDK wraps them', () => {
    const refused = apiError(
      undefined,
      'Cannot connect to API: connect ECONNREFUSED',
      networkError('ECONNREFUSED'),
    );
    expect(classifyTurnError(refused)).toEqual({ kind: 'model', errorKind: 'network' });
    const retried = new RetryError({
      message: 'failed after 3 attempts',
      reason: 'maxRetriesExceeded',
      errors: [refused],
    });
    expect(classifyTurnError(retried)).toEqual({ kind: 'model', errorKind: 'network' });
    const dns = Object.assign(new TypeError('fetch failed'), { cause: networkError('ENOTFOUND') });
    expect(classifyTurnError(dns)).toEqual({ kind: 'model', errorKind: 'network' });
    expect(classifyTurnError(new DOMException('step timed out', 'TimeoutError'))).toEqual({
      kind: 'model',
      errorKind: 'timeout',
    });
  });

  it('a provider 400, a context overflow and a refused file are the message’s', () => {
    expect(classifyTurnError(apiError(400, 'Invalid image'))).toEqual({
      kind: 'message',
      code: 'CONTENT_REJECTED',
    });
    expect(classifyTurnError(apiError(422))).toEqual({ kind: 'message', code: 'CONTENT_REJECTED' });
    expect(classifyTurnError(apiError(400, "This model's maximum context length is 8192 tokens"))).toEqual({
      kind: 'message',
      code: 'CONTEXT_OVERFLOW',
    });
    expect(classifyTurnError(new FileRefusedError('private address'))).toEqual({
      kind: 'message',
      code: 'FILE_REFUSED',
    });
    expect(
      classifyTurnError(new DownloadError({ url: 'https://x/y', statusCode: 404, statusText: 'no' })),
    ).toEqual({
      kind: 'message',
      code: 'FILE_REFUSED',
    });
  });

  it('an error inside an opened stream counts by the status it names, as the SDK or the provider sends it', () => {
    // What a turn gets from streamText (the SDK wraps the provider's error part).
    expect(classifyTurnError(new StreamProviderError({ message: 'Overloaded', statusCode: 529 }))).toEqual({
      kind: 'model',
      errorKind: 'server',
    });
    // What the fallback reads from the provider's stream: the Anthropic/OpenAI/Google packages'
    // error part, and an OpenAI-compatible server's in-stream error with the status as its code.
    const part = { message: 'Overloaded', type: 'overloaded_error', statusCode: 529, isRetryable: true };
    expect(classifyTurnError(part)).toEqual({ kind: 'model', errorKind: 'server' });
    expect(classifyTurnError({ message: 'slow down', code: '429' })).toEqual({
      kind: 'model',
      errorKind: 'rate_limit',
    });
    expect(classifyTurnError({ message: 'upstream', code: 502 })).toEqual({
      kind: 'model',
      errorKind: 'server',
    });
    expect(classifyTurnError({ message: 'refused', statusCode: 400 })).toEqual({
      kind: 'message',
      code: 'CONTENT_REJECTED',
    });
    // No status named: nothing to go by.
    expect(classifyTurnError({ message: 'odd', code: 'server_error' })).toEqual({
      kind: 'transient',
      infrastructure: false,
    });
    expect(classifyTurnError(new StreamProviderError({ message: 'odd' }))).toEqual({
      kind: 'transient',
      infrastructure: false,
    });
  });

  it('anything else is transient; Redis trouble is marked as infrastructure (never fails a batch)', () => {
    expect(classifyTurnError(new Error('a bug'))).toEqual({ kind: 'transient', infrastructure: false });
    expect(classifyTurnError(new Error('Connection is closed.'))).toEqual({
      kind: 'transient',
      infrastructure: true,
    });
    // A Cluster redirect ioredis did not follow (a slot moved in a failover): on a final
    // attempt it would otherwise fail the batch and send the user the failure notice.
    expect(classifyTurnError(new ReplyError('MOVED 4421 127.0.0.1:7102'))).toEqual({
      kind: 'transient',
      infrastructure: true,
    });
  });
});

describe('model backoff and health', () => {
  it('doubles per start of the job from the base, capped, with ±20 % jitter', () => {
    const mid = () => 0.5;
    expect([1, 2, 3, 4, 10, 100].map((n) => modelRetryDelay(n, 100, 1000, mid))).toEqual([
      100, 200, 400, 800, 1000, 1000,
    ]);
    expect(modelRetryDelay(1, 100, 1000, () => 0)).toBe(80);
    expect(modelRetryDelay(1, 100, 1000, () => 0.999)).toBeLessThanOrEqual(120);
  });

  it('reports failing since the first error of a run, and ok after a success', () => {
    const health = new ModelHealth();
    health.failed('auth', '401', Date.parse('2026-01-01T00:00:00Z'));
    health.failed('network', 'refused', Date.parse('2026-01-01T00:01:00Z'));
    expect(health.status()).toEqual({
      status: 'failing',
      kind: 'network',
      since: '2026-01-01T00:00:00.000Z',
      failures: 2,
      error: 'refused',
    });
    health.succeeded();
    expect(health.status()).toEqual({ status: 'ok' });
  });
});
