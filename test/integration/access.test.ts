import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import type { TestIngressOptions } from '../helpers/ingress.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { deleteLabel, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';
import { routesOf, urlOf } from '../helpers/routes.js';

/**
 * Who may call what (docs/security.md): /v1 with a token set, /metrics, the board, the count of
 * failed authentications and the security headers. Every refusal writes nothing.
 */

const LABEL = 'access';
const API_TOKEN = 'an-api-token-of-at-least-32-characters';
const METRICS_TOKEN = 'a-metrics-token-of-at-least-32-chars';
const SECRET = 'a-web-token-secret-of-at-least-32-characters';
const redis = testRedis('ingress');
const open: TestIngress[] = [];

async function ingress(opts: TestIngressOptions): Promise<TestIngress> {
  const ing = await testIngress(redis, randomPrefix(LABEL), opts);
  open.push(ing);
  return ing;
}

function capturedLogger() {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

beforeAll(() => waitReady(redis));
afterEach(async () => {
  await Promise.all(open.splice(0).map((ing) => ing.close()));
});
afterAll(async () => {
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

describe('WEB_TOKEN_SECRET alone turns auth on for every /v1 route', () => {
  it('an anonymous request to any /v1 route is 401 UNAUTHORIZED, and nothing is written', async () => {
    // Not counting failures here: this test sends dozens of wrong tokens from one address.
    const ing = await ingress({
      web: { tokenSecret: SECRET },
      security: { authFailures: { limit: 0, windowMs: 1000 } },
    });
    await queueMetaWritten(redis, ing.store.prefix);
    const before = (await keysUnder(redis, ing.store.prefix)).sort();
    const routes = routesOf(ing.app).filter((r) => r.url.startsWith('/v1'));
    expect(routes.map((r) => `${r.method} ${r.url}`)).toEqual(
      expect.arrayContaining([
        'POST /v1/chats/:chatKey/messages',
        'POST /v1/ui',
        'GET /v1/chats/:chatKey/stream',
      ]),
    );
    for (const route of routes) {
      for (const headers of [{}, bearer('not-a-token'), bearer(`${API_TOKEN}x`)]) {
        const res = await ing.app.inject({
          method: route.method as 'GET',
          url: urlOf(route.url, 'anon-chat'),
          headers: { ...headers, 'content-type': 'application/json' },
          payload: route.method === 'GET' ? undefined : JSON.stringify({ id: 'anon-chat', text: 'hi' }),
          remoteAddress: '192.0.2.1',
        });
        expect(res.statusCode, `${route.method} ${route.url} ${JSON.stringify(headers)}`).toBe(401);
        expect(res.json().error.code).toBe('UNAUTHORIZED');
      }
    }
    expect((await keysUnder(redis, ing.store.prefix)).sort()).toEqual(before);
  });

  it("a browser token still opens its own chat's /v1/ui routes", async () => {
    const ing = await ingress({ web: { tokenSecret: SECRET } });
    const res = await ing.app.inject({
      method: 'GET',
      url: '/v1/ui/web-a/messages',
      headers: bearer(await mintWebToken(SECRET, 'web-a')),
    });
    expect(res.statusCode).toBe(200);
  });
});

describe('/metrics', () => {
  const scrape = (ing: TestIngress, headers: Record<string, string> = {}) =>
    ing.app.inject({ method: 'GET', url: '/metrics', headers, remoteAddress: '192.0.2.2' });

  it('with /v1 closed and no METRICS_TOKEN it answers nobody, says so once at start, and probes stay open', async () => {
    const { logger, lines } = capturedLogger();
    const ing = await ingress({ apiToken: API_TOKEN, logger });
    for (const headers of [{}, bearer(API_TOKEN), bearer(METRICS_TOKEN)]) {
      const res = await scrape(ing, headers);
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toMatchObject({
        code: 'UNAUTHORIZED',
        message: expect.stringContaining('METRICS_TOKEN'),
      });
    }
    expect(lines.filter((l) => l.msg.includes('METRICS_TOKEN'))).toHaveLength(1);
    for (const url of ['/healthz', '/readyz']) {
      expect((await ing.app.inject({ method: 'GET', url })).statusCode, url).toBe(200);
    }
  });

  it('with METRICS_TOKEN it answers that token only: not the API token, not a browser token', async () => {
    const { logger, lines } = capturedLogger();
    const ing = await ingress({
      apiToken: API_TOKEN,
      web: { tokenSecret: SECRET },
      security: { metricsToken: METRICS_TOKEN },
      logger,
    });
    expect((await scrape(ing)).statusCode).toBe(401);
    expect((await scrape(ing, bearer(API_TOKEN))).statusCode).toBe(401);
    expect((await scrape(ing, bearer(await mintWebToken(SECRET, 'web-a')))).statusCode).toBe(401);
    const ok = await scrape(ing, bearer(METRICS_TOKEN));
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toContain('chatlane_http_request_duration_seconds');
    expect(lines.filter((l) => l.msg.includes('METRICS_TOKEN'))).toEqual([]);
  });

  it('with /v1 open it is open too, unless METRICS_TOKEN is set', async () => {
    expect((await scrape(await ingress({}))).statusCode).toBe(200);
    const guarded = await ingress({ security: { metricsToken: METRICS_TOKEN } });
    expect((await scrape(guarded)).statusCode).toBe(401);
    expect((await scrape(guarded, bearer(METRICS_TOKEN))).statusCode).toBe(200);
  });
});

describe('failed authentications are counted per client address', () => {
  const limits = { authFailures: { limit: 5, windowMs: 60_000 } };
  const post = (ing: TestIngress, token: string | undefined, remoteAddress: string, extra = {}) =>
    ing.app.inject({
      method: 'POST',
      url: '/v1/chats/guess/messages',
      headers: { ...(token ? bearer(token) : {}), ...extra },
      payload: { text: 'hi' },
      remoteAddress,
    });

  it('past the limit an address gets 429 with Retry-After, even with the right token; other addresses do not', async () => {
    const { logger, lines } = capturedLogger();
    const ing = await ingress({ apiToken: API_TOKEN, security: limits, logger });
    for (let i = 0; i < 5; i++) expect((await post(ing, `wrong-${i}`, '198.51.100.7')).statusCode).toBe(401);
    const refused = await post(ing, API_TOKEN, '198.51.100.7');
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error.code).toBe('TOO_MANY_AUTH_FAILURES');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect((await post(ing, API_TOKEN, '198.51.100.8')).statusCode).toBe(202);
    expect(lines.filter((l) => l.msg.startsWith('too many failed authentications'))).toHaveLength(1);
  });

  it('a request without any credential guesses nothing and is not counted', async () => {
    const ing = await ingress({ apiToken: API_TOKEN, security: limits });
    for (let i = 0; i < 10; i++) expect((await post(ing, undefined, '198.51.100.9')).statusCode).toBe(401);
    expect((await post(ing, API_TOKEN, '198.51.100.9')).statusCode).toBe(202);
  });

  it('wrong metrics tokens and board passwords count toward the same limit', async () => {
    const ing = await ingress({
      apiToken: API_TOKEN,
      admin: { user: 'ops', password: 'a-board-password' },
      security: { ...limits, metricsToken: METRICS_TOKEN },
    });
    const address = '198.51.100.10';
    const wrongBoard = `Basic ${Buffer.from('ops:wrong-password').toString('base64')}`;
    for (let i = 0; i < 3; i++) {
      const res = await ing.app.inject({
        method: 'GET',
        url: '/admin/queues',
        headers: { authorization: wrongBoard },
        remoteAddress: address,
      });
      expect(res.statusCode).toBe(401);
    }
    for (let i = 0; i < 2; i++) {
      const res = await ing.app.inject({
        method: 'GET',
        url: '/metrics',
        headers: bearer('x'),
        remoteAddress: address,
      });
      expect(res.statusCode).toBe(401);
    }
    const board = await ing.app.inject({
      method: 'GET',
      url: '/admin/queues',
      headers: { authorization: `Basic ${Buffer.from('ops:a-board-password').toString('base64')}` },
      remoteAddress: address,
    });
    expect(board.statusCode).toBe(429);
    const metrics = await ing.app.inject({
      method: 'GET',
      url: '/metrics',
      headers: bearer(METRICS_TOKEN),
      remoteAddress: address,
    });
    expect(metrics.statusCode).toBe(429);
    expect((await post(ing, API_TOKEN, address)).statusCode).toBe(429);
  });

  it('behind a proxy that is not trusted nothing is counted (one client would lock all out), and it says why once', async () => {
    const { logger, lines } = capturedLogger();
    const ing = await ingress({ apiToken: API_TOKEN, security: limits, logger });
    const viaProxy = { 'x-forwarded-for': '203.0.113.7' };
    for (let i = 0; i < 8; i++) expect((await post(ing, 'wrong', '10.0.0.5', viaProxy)).statusCode).toBe(401);
    expect((await post(ing, API_TOKEN, '10.0.0.5', viaProxy)).statusCode).toBe(202);
    expect(lines.filter((l) => l.msg.includes('TRUST_PROXY'))).toHaveLength(1);
    // A client that reaches the port directly cannot slip out of the count by sending the header.
    for (let i = 0; i < 5; i++)
      expect((await post(ing, 'wrong', '198.51.100.11', viaProxy)).statusCode).toBe(401);
    expect((await post(ing, API_TOKEN, '198.51.100.11', viaProxy)).statusCode).toBe(429);
  });

  it('behind a trusted proxy each forwarded client is counted on its own', async () => {
    const ing = await ingress({ apiToken: API_TOKEN, security: { ...limits, trustProxy: ['10.0.0.0/8'] } });
    const from = (client: string) => ({ 'x-forwarded-for': client });
    for (let i = 0; i < 5; i++) await post(ing, 'wrong', '10.0.0.5', from('203.0.113.7'));
    expect((await post(ing, API_TOKEN, '10.0.0.5', from('203.0.113.7'))).statusCode).toBe(429);
    expect((await post(ing, API_TOKEN, '10.0.0.5', from('203.0.113.8'))).statusCode).toBe(202);
  });
});

describe('security headers', () => {
  it('every API answer forbids framing, scripts and sniffing', async () => {
    const ing = await ingress({ apiToken: API_TOKEN });
    for (const [method, url, headers, status] of [
      ['GET', '/v1/chats/hdr/messages', bearer(API_TOKEN), 200],
      ['GET', '/v1/chats/hdr/messages', {}, 401],
      // A handler's own error answer (nothing stored) carries them as well.
      ['POST', '/v1/chats/hdr/messages', bearer(API_TOKEN), 400],
    ] as const) {
      const res = await ing.app.inject({
        method,
        url,
        headers,
        ...(method === 'POST' && { payload: { text: 1 } }),
      });
      expect(res.statusCode).toBe(status);
      expect(res.headers['content-security-policy']).toBe("default-src 'none';frame-ancestors 'none'");
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  it('a hijacked event stream carries them too', async () => {
    const ing = await ingress({ apiToken: API_TOKEN });
    const base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
    const controller = new AbortController();
    const res = await fetch(`${base}/v1/chats/hdr/stream`, {
      headers: bearer(API_TOKEN),
      signal: controller.signal,
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('content-security-policy')).toBe("default-src 'none';frame-ancestors 'none'");
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    controller.abort();
  });

  it("Bull Board's pages may not be framed and run only the board's own scripts", async () => {
    const ing = await ingress({ admin: { user: 'ops', password: 'a-board-password' } });
    for (const authorization of [
      undefined,
      `Basic ${Buffer.from('ops:a-board-password').toString('base64')}`,
    ]) {
      const res = await ing.app.inject({
        method: 'GET',
        url: '/admin/queues',
        headers: authorization ? { authorization } : {},
      });
      expect(res.statusCode).toBe(authorization ? 200 : 401);
      expect(res.headers['x-frame-options']).toBe('DENY');
      const csp = String(res.headers['content-security-policy']);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("script-src 'self'");
    }
  });
});
