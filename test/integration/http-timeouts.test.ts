import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config.js';
import { waitReady } from '../../src/shared/redis.js';
import { listeningIngress, type TestIngress } from '../helpers/ingress.js';
import { rawHttp } from '../helpers/raw-http.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * Slow clients cannot hold connections: raw sockets that stop half-way through the headers
 * or the body, or drip them, are answered 408 in the documented shape and closed once the
 * configured time is up. Short timeouts here; seconds by default (see the config test).
 */

const HEADERS_MS = 400;
const REQUEST_MS = 800;
const KEEP_ALIVE_MS = 1200;
// Node checks connections every quarter timeout; allow that plus a loaded machine's lag.
const SLACK_MS = 1500;

const redis = testRedis('ingress');
const prefix = randomPrefix('slow');
let ing: TestIngress;
let port: number;

beforeAll(async () => {
  await waitReady(redis);
  ({ ing, port } = await listeningIngress(redis, prefix, {
    http: { headersTimeoutMs: HEADERS_MS, requestTimeoutMs: REQUEST_MS, keepAliveTimeoutMs: KEEP_ALIVE_MS },
  }));
});
afterAll(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

function expect408(res: Awaited<ReturnType<typeof rawHttp>>, withinMs: number) {
  expect(res.status, res.raw).toBe(408);
  expect(JSON.parse(res.body)).toEqual({
    error: { code: 'REQUEST_TIMEOUT', message: 'the request was not received in time' },
  });
  expect(res.ended).not.toBe('timeout');
  expect(res.ms).toBeLessThan(withinMs + SLACK_MS);
}

describe('slow clients', () => {
  it('closes a connection whose headers stop half-way, with 408, once the headers timeout is up', async () => {
    const res = await rawHttp(port, ['POST /v1/chats/a/messages HTTP/1.1\r\nHost: x\r\nContent-Ty'], {
      timeoutMs: 10_000,
    });
    expect408(res, HEADERS_MS);
    expect(res.ms).toBeGreaterThanOrEqual(HEADERS_MS - 50);
  });

  it('closes a connection that drips its headers a byte at a time (bytes keep coming, headers never end)', async () => {
    const line = 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ';
    const drip = Array.from({ length: 60 }, () => 'a');
    const res = await rawHttp(port, [line, ...drip], { timeoutMs: 10_000, gapMs: 50 });
    // The answer came while the client was still dripping, not after it stopped.
    expect(res.status, res.raw).toBe(408);
    expect(JSON.parse(res.body).error.code).toBe('REQUEST_TIMEOUT');
  });

  it('closes a connection whose body is shorter than its Content-Length, with 408, once the request timeout is up', async () => {
    const res = await rawHttp(
      port,
      [
        'POST /v1/chats/a/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"text":',
      ],
      { timeoutMs: 10_000 },
    );
    expect408(res, REQUEST_MS);
    expect(res.ms).toBeGreaterThanOrEqual(REQUEST_MS - HEADERS_MS);
    expect(await ing.store.pendingCount('a')).toBe(0);
  });

  it('closes a connection that never sends a byte', async () => {
    const res = await rawHttp(port, [], { timeoutMs: 10_000 });
    expect408(res, HEADERS_MS);
  });
});

describe('keep-alive behind a load balancer', () => {
  it('announces the keep-alive timeout and closes an idle connection after it', async () => {
    const res = await rawHttp(port, ['GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'], {
      timeoutMs: 10_000,
      untilClose: true,
    });
    expect(res.status).toBe(200);
    expect(res.headers['keep-alive']).toBe(`timeout=${Math.floor(KEEP_ALIVE_MS / 1000)}`);
    expect(res.ended).toBe('closed');
    // Node closes an idle keep-alive socket one second after the announced timeout.
    expect(res.ms).toBeGreaterThanOrEqual(KEEP_ALIVE_MS - 50);
    expect(res.ms).toBeLessThan(KEEP_ALIVE_MS + 1000 + SLACK_MS);
  });

  it('keeps serving a connection that idles longer than the headers timeout (Node ≥ 18 times headers per request)', async () => {
    // A balancer reuses its connection after an idle gap shorter than our keep-alive timeout:
    // the gap must not count against the next request's headers.
    const res = await rawHttp(
      port,
      [
        'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n',
        'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      ],
      { timeoutMs: 10_000, gapMs: HEADERS_MS + 300, untilClose: true },
    );
    const answers = res.raw.match(/HTTP\/1\.1 200 OK/g) ?? [];
    expect(answers).toHaveLength(2);
  });
});

describe('configuration', () => {
  it('defaults to seconds: headers 10 s, whole request 30 s, keep-alive 65 s (above a 60 s balancer idle timeout)', () => {
    const c = loadConfig({});
    expect([c.HTTP_HEADERS_TIMEOUT_MS, c.HTTP_REQUEST_TIMEOUT_MS, c.HTTP_KEEP_ALIVE_TIMEOUT_MS]).toEqual([
      10_000, 30_000, 65_000,
    ]);
  });

  it('refuses a headers timeout longer than the request timeout, naming the variable', () => {
    expect(() => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '5000', HTTP_REQUEST_TIMEOUT_MS: '1000' })).toThrow(
      /HTTP_HEADERS_TIMEOUT_MS/,
    );
  });
});
