import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/ingress/errors.js';
import { waitReady } from '../../src/shared/redis.js';
import { prng } from '../helpers/hostile-text.js';
import { listeningIngress, type TestIngress } from '../helpers/ingress.js';
import { type RawResponse, rawHttp } from '../helpers/raw-http.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * Every error the ingress sends is `{ error: { code, message } }` with a code from the
 * registry and the status the registry gives it, and nothing internal in it — whether the
 * request was refused by a route, by Fastify's router or by Node's HTTP parser. Requests go
 * over raw sockets: an HTTP client would refuse to send most of them.
 */

const redis = testRedis('ingress');
const prefix = randomPrefix('errshape');
let ing: TestIngress;
let port: number;
let patient: TestIngress;
/** The default slow-client timeouts: a whole request is never answered 408 on a loaded machine. */
let patientPort: number;

beforeAll(async () => {
  await waitReady(redis);
  // Short slow-client timeouts: a fuzzed request cut short is answered 408 in a moment.
  ({ ing, port } = await listeningIngress(redis, prefix, {
    http: { headersTimeoutMs: 150, requestTimeoutMs: 300, keepAliveTimeoutMs: 5000 },
  }));
  ({ ing: patient, port: patientPort } = await listeningIngress(redis, prefix));
});
afterAll(async () => {
  await ing.close();
  await patient.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

/** Words that would give away internals: Fastify/Node codes, Redis replies, stack frames. */
const INTERNAL =
  /FST_|HPE_|ERR_|ReplyError|Redis|redis|stream ID|at .*\.js|node:internal|statusCode|Client Error/;

function expectDocumentedError(res: RawResponse, what: string): { code: string; message: string } {
  expect(res.status, `${what}: status\n${res.raw.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
  expect(res.headers['content-type'] ?? '', `${what}: content-type\n${res.raw.slice(0, 400)}`).toMatch(
    /^application\/json/,
  );
  let body: unknown;
  expect(
    () => {
      body = JSON.parse(res.body);
    },
    `${what}: JSON body\n${res.raw.slice(0, 300)}`,
  ).not.toThrow();
  expect(Object.keys(body as object), what).toEqual(['error']);
  const error = (body as { error: { code: string; message: string } }).error;
  expect(Object.keys(error).sort(), what).toEqual(['code', 'message']);
  expect(Object.keys(ERROR_CODES), what).toContain(error.code);
  expect(ERROR_CODES[error.code as keyof typeof ERROR_CODES], `${what}: status of ${error.code}`).toBe(
    res.status,
  );
  expect(error.message.length, what).toBeGreaterThan(0);
  expect(error.message, what).not.toMatch(INTERNAL);
  return error;
}

const request = (line: string, headers: string[] = [], body = '') =>
  `${line}\r\n${['Host: x', ...headers].join('\r\n')}\r\n\r\n${body}`;
const post = (path: string, body: string, headers: string[] = []) =>
  request(
    `POST ${path} HTTP/1.1`,
    ['Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`, ...headers],
    body,
  );

describe('errors before any route runs', () => {
  const cases: Array<[string, string | Buffer, number, string]> = [
    ['a garbage request line', 'GARBAGE\r\n\r\n', 400, 'BAD_REQUEST'],
    ['an unknown method', request('BREW /v1/chats/a/messages HTTP/1.1'), 400, 'BAD_REQUEST'],
    ['an unknown HTTP version', 'GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n', 400, 'BAD_REQUEST'],
    ['a header without a colon', 'GET /healthz HTTP/1.1\r\nHost x\r\n\r\n', 400, 'BAD_REQUEST'],
    ['binary noise', Buffer.from([0, 1, 2, 3, 255, 254, 13, 10, 13, 10]), 400, 'BAD_REQUEST'],
    [
      'a non-numeric Content-Length',
      request('POST /v1/chats/a/messages HTTP/1.1', ['Content-Length: abc'], '{}'),
      400,
      'BAD_REQUEST',
    ],
    [
      'Content-Length and chunked together',
      request(
        'POST /v1/chats/a/messages HTTP/1.1',
        ['Content-Length: 2', 'Transfer-Encoding: chunked'],
        '{}',
      ),
      400,
      'BAD_REQUEST',
    ],
    [
      'a bad chunk size',
      request(
        'POST /v1/chats/a/messages HTTP/1.1',
        ['Content-Type: application/json', 'Transfer-Encoding: chunked'],
        'zz\r\n{}\r\n0\r\n\r\n',
      ),
      400,
      'BAD_REQUEST',
    ],
    [
      'headers over 16 KiB',
      request('GET /healthz HTTP/1.1', [`X-Big: ${'a'.repeat(20_000)}`]),
      431,
      'HEADERS_TOO_LARGE',
    ],
    [
      'a URL over 16 KiB',
      request(`GET /v1/chats/${'a'.repeat(20_000)}/messages HTTP/1.1`),
      431,
      'HEADERS_TOO_LARGE',
    ],
    [
      'malformed percent-encoding in the path',
      request('GET /v1/chats/%ZZ/messages HTTP/1.1'),
      400,
      'INVALID_URL',
    ],
    ['a truncated percent-escape', request('GET /v1/chats/a%E0%A4%A/messages HTTP/1.1'), 400, 'INVALID_URL'],
    [
      'a path segment over 256 characters',
      request(`GET /v1/chats/${'a'.repeat(300)}/messages HTTP/1.1`),
      414,
      'URI_TOO_LONG',
    ],
  ];
  for (const [name, bytes, status, code] of cases) {
    it(`answers ${status} ${code} for ${name}`, async () => {
      const res = await rawHttp(patientPort, [bytes]);
      expect(res.status).toBe(status);
      expect(expectDocumentedError(res, name).code).toBe(code);
    });
  }
});

describe('errors from routes', () => {
  const cases: Array<[string, string, number, string]> = [
    ['a chatKey of ..', post('/v1/chats/../messages', '{"text":"x"}'), 400, 'INVALID_CHAT_KEY'],
    ['a chatKey of %2E%2E', post('/v1/chats/%2E%2E/messages', '{"text":"x"}'), 400, 'INVALID_CHAT_KEY'],
    ['a chatKey of .', post('/v1/chats/./messages', '{"text":"x"}'), 400, 'INVALID_CHAT_KEY'],
    ['a chatKey of %2e', request('GET /v1/chats/%2e/outbox HTTP/1.1'), 400, 'INVALID_CHAT_KEY'],
    [
      'a stream cursor past 64 bits',
      request('GET /v1/chats/a/outbox?after=18446744073709551616-0 HTTP/1.1'),
      400,
      'INVALID_CURSOR',
    ],
    [
      'a stream cursor sequence past 64 bits',
      request('GET /v1/chats/a/events?after=1-99999999999999999999 HTTP/1.1'),
      400,
      'INVALID_CURSOR',
    ],
    [
      'an archive cursor of 1e400',
      request('GET /v1/chats/a/archive?after=1e400 HTTP/1.1'),
      400,
      'INVALID_CURSOR',
    ],
    ['an unknown route', request('GET /nope HTTP/1.1'), 404, 'NOT_FOUND'],
    ['a known path with the wrong method', request('PUT /v1/chats/a/messages HTTP/1.1'), 404, 'NOT_FOUND'],
    ['invalid JSON', post('/v1/chats/a/messages', '{"text":'), 400, 'INVALID_JSON'],
    [
      'a form body',
      request(
        'POST /v1/chats/a/messages HTTP/1.1',
        ['Content-Type: application/x-www-form-urlencoded', 'Content-Length: 3'],
        'a=b',
      ),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'a body over the limit',
      post('/v1/chats/a/messages', `{"text":"${'x'.repeat(300 * 1024)}"}`),
      413,
      'BODY_TOO_LARGE',
    ],
    [
      'a prototype-poisoning body',
      post('/v1/chats/a/messages', '{"text":"x","__proto__":{"a":1}}'),
      400,
      'INVALID_JSON',
    ],
    [
      'a context switch on a chat that does not exist',
      post('/v1/chats/nobody/contexts', '{"action":"new"}'),
      404,
      'CHAT_NOT_FOUND',
    ],
    [
      'clearing a chat that does not exist',
      post('/v1/chats/nobody/contexts', '{"action":"clear"}'),
      404,
      'CHAT_NOT_FOUND',
    ],
  ];
  for (const [name, bytes, status, code] of cases) {
    it(`answers ${status} ${code} for ${name} and writes nothing`, async () => {
      const res = await rawHttp(patientPort, [bytes]);
      expect(res.status).toBe(status);
      expect(expectDocumentedError(res, name).code).toBe(code);
      expect((await keysUnder(redis, prefix)).filter((k) => k.includes(':{c:'))).toEqual([]);
    });
  }
});

describe('fuzz', () => {
  const valid = [
    post('/v1/chats/fuzz/messages', '{"id":"m1","text":"hello","metadata":{"userId":"u"}}'),
    request('GET /v1/chats/fuzz/outbox?after=1-0&limit=5 HTTP/1.1'),
    post('/v1/chats/fuzz/contexts', '{"action":"load","query":"x"}'),
    request('GET /v1/chats/fuzz/events HTTP/1.1', ['Accept: application/json']),
  ];
  const noise = [
    '\u0000',
    '\r',
    '\n',
    '\r\n',
    ' ',
    '%',
    '%0',
    '%ZZ',
    '/../',
    '{',
    '"',
    '\\',
    '\ud800',
    'é',
    '😀',
    '?',
    '#',
    ':',
    '\t',
  ];

  /** A valid request with a few random edits: replace, insert, delete or duplicate a slice. */
  function mutate(rand: () => number, base: string): string {
    let s = base;
    const edits = 1 + Math.floor(rand() * 3);
    for (let e = 0; e < edits; e++) {
      const at = Math.floor(rand() * s.length);
      const kind = Math.floor(rand() * 5);
      const piece = noise[Math.floor(rand() * noise.length)]!;
      if (kind === 0) s = s.slice(0, at) + piece + s.slice(at + 1);
      else if (kind === 1) s = s.slice(0, at) + piece + s.slice(at);
      else if (kind === 2) s = s.slice(0, at) + s.slice(at + 1 + Math.floor(rand() * 8));
      else if (kind === 3)
        s = s.slice(0, at) + s.slice(at, at + 40).repeat(1 + Math.floor(rand() * 4)) + s.slice(at);
      else s = s.slice(0, at) + String.fromCharCode(Math.floor(rand() * 256)) + s.slice(at + 1);
    }
    return s;
  }

  it('answers 600 mutated requests either with success or with a documented error, never anything else', async () => {
    const rand = prng(2024);
    const seen = new Map<string, number>();
    let answered = 0;
    for (let i = 0; i < 600; i++) {
      const bytes = mutate(rand, valid[i % valid.length]!);
      const res = await rawHttp(port, [Buffer.from(bytes, 'utf8')], { timeoutMs: 5000 });
      // A request cut short is answered 408 once the short request timeout is up.
      expect(res.status, `no answer to ${JSON.stringify(bytes)}`).toBeDefined();
      answered++;
      if ((res.status ?? 0) < 400) continue;
      const { code } = expectDocumentedError(res, JSON.stringify(bytes).slice(0, 200));
      seen.set(code, (seen.get(code) ?? 0) + 1);
    }
    expect(answered).toBe(600);
    // The fuzz reached the parser, the router and the routes.
    expect([...seen.keys()]).toEqual(
      expect.arrayContaining(['BAD_REQUEST', 'REQUEST_TIMEOUT', 'VALIDATION_FAILED']),
    );
  }, 120_000);
});
