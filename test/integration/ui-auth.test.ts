import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * Browser tokens, CORS and bad input of /v1/ui: every refusal is the documented 4xx and
 * writes nothing (the keyspace under the prefix is what it was).
 */

const SECRET = 'a-web-token-secret-of-at-least-32-characters';
const API_TOKEN = 'api-token-for-the-backend';
const ORIGIN = 'https://app.example.com';
const redis = testRedis('ingress');
const prefix = randomPrefix('uiauth');
let ing: TestIngress;
let keysBefore: string[];

beforeAll(async () => {
  await waitReady(redis);
  ing = await testIngress(redis, prefix, {
    apiToken: API_TOKEN,
    web: { tokenSecret: SECRET, origins: [ORIGIN], waitMs: 60_000 },
  });
  await queueMetaWritten(redis, prefix);
  keysBefore = (await keysUnder(redis, prefix)).sort();
});
afterAll(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

function uiBody(chatKey: string, overrides: Record<string, unknown> = {}) {
  return {
    id: chatKey,
    messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hello' }] }],
    trigger: 'submit-message',
    messageId: undefined,
    ...overrides,
  };
}

async function post(token: string | undefined, body: unknown, path = '/v1/ui') {
  return ing.app.inject({
    method: 'POST',
    url: path,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    payload: body as Record<string, unknown>,
  });
}

async function expectNothingWritten() {
  expect((await keysUnder(redis, prefix)).sort()).toEqual(keysBefore);
}

describe('browser tokens', () => {
  it('a request without a token is refused with 401 UNAUTHORIZED', async () => {
    const res = await post(undefined, uiBody('web-a'));
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe('UNAUTHORIZED');
    await expectNothingWritten();
  });

  it('an expired token is refused with 401 UNAUTHORIZED', async () => {
    const expired = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('web-a')
      .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
      .sign(new TextEncoder().encode(SECRET));
    const res = await post(expired, uiBody('web-a'));
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toMatchObject({ code: 'UNAUTHORIZED', message: 'browser token expired' });
    await expectNothingWritten();
  });

  it('a token signed with another key is refused with 401 UNAUTHORIZED', async () => {
    const forged = await mintWebToken('another-secret-that-is-also-32-characters-long', 'web-a');
    const res = await post(forged, uiBody('web-a'));
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe('UNAUTHORIZED');
    await expectNothingWritten();
  });

  it('a token without exp is refused with 401 UNAUTHORIZED', async () => {
    const forever = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('web-a')
      .sign(new TextEncoder().encode(SECRET));
    const res = await post(forever, uiBody('web-a'));
    expect(res.statusCode).toBe(401);
    await expectNothingWritten();
  });

  it('a token for another chat is refused with 403 FORBIDDEN on every /v1/ui route and the live stream', async () => {
    const token = await mintWebToken(SECRET, 'web-b');
    const sent = await post(token, uiBody('web-a'));
    expect(sent.statusCode).toBe(403);
    expect(sent.json().error.code).toBe('FORBIDDEN');
    for (const [method, url] of [
      ['GET', '/v1/ui/web-a/stream'],
      ['GET', '/v1/ui/web-a/messages'],
      ['POST', '/v1/ui/web-a/stop'],
      ['GET', '/v1/chats/web-a/stream'],
    ] as const) {
      const res = await ing.app.inject({ method, url, headers: { authorization: `Bearer ${token}` } });
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      expect(res.json().error.code).toBe('FORBIDDEN');
    }
    await expectNothingWritten();
  });

  it('a token opens nothing outside /v1/ui and its live stream: 403 FORBIDDEN', async () => {
    const token = await mintWebToken(SECRET, 'web-a');
    const res = await ing.app.inject({
      method: 'POST',
      url: '/v1/chats/web-a/messages',
      headers: { authorization: `Bearer ${token}` },
      payload: { text: 'hi' },
    });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe('FORBIDDEN');
    await expectNothingWritten();
  });

  it("a token opens its own chat's messages; the API token opens any chat's", async () => {
    const token = await mintWebToken(SECRET, 'web-a');
    const own = await ing.app.inject({
      method: 'GET',
      url: '/v1/ui/web-a/messages',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(own.statusCode).toBe(200);
    expect(own.json()).toEqual({ chatKey: 'web-a', messages: [] });
    const backend = await ing.app.inject({
      method: 'GET',
      url: '/v1/ui/web-z/messages',
      headers: { authorization: `Bearer ${API_TOKEN}` },
    });
    expect(backend.statusCode).toBe(200);
  });

  it('resuming a chat where nothing streams is 204', async () => {
    const token = await mintWebToken(SECRET, 'web-a');
    const res = await ing.app.inject({
      method: 'GET',
      url: '/v1/ui/web-a/stream',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
  });
});

describe('bad input to POST /v1/ui', () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['a chatKey with a brace', { id: 'web{a}' }, 'INVALID_CHAT_KEY'],
    ['no messages', { messages: [] }, 'VALIDATION_FAILED'],
    ['an unknown trigger', { trigger: 'resume' }, 'VALIDATION_FAILED'],
    ['regenerate-message', { trigger: 'regenerate-message', messageId: 'a1' }, 'UNSUPPORTED_TRIGGER'],
    [
      'a newest message that is not the user’s',
      { messages: [{ id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'x' }] }] },
      'VALIDATION_FAILED',
    ],
    [
      'a message id with a space',
      { messages: [{ id: 'm 1', role: 'user', parts: [{ type: 'text', text: 'x' }] }] },
      'VALIDATION_FAILED',
    ],
    ['a message without parts', { messages: [{ id: 'm1', role: 'user', parts: [] }] }, 'VALIDATION_FAILED'],
    [
      'a part type a person does not send',
      { messages: [{ id: 'm1', role: 'user', parts: [{ type: 'data-x', data: 1 }] }] },
      'VALIDATION_FAILED',
    ],
    [
      'a file part from a private address',
      {
        messages: [
          {
            id: 'm1',
            role: 'user',
            parts: [{ type: 'file', mediaType: 'image/png', url: 'http://127.0.0.1/x.png' }],
          },
        ],
      },
      'FILE_URL_NOT_ALLOWED',
    ],
  ];
  for (const [what, overrides, code] of cases) {
    it(`${what}: 400 ${code}, nothing written`, async () => {
      const res = await post(API_TOKEN, uiBody('web-bad', overrides));
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe(code);
      await expectNothingWritten();
    });
  }
});

describe('CORS', () => {
  it('a preflight from an allowed origin is answered with that origin and the bearer header allowed', async () => {
    const res = await ing.app.inject({
      method: 'OPTIONS',
      url: '/v1/ui',
      headers: {
        origin: ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(String(res.headers['access-control-allow-headers'])).toContain('authorization');
  });

  it('another origin gets no CORS headers (the browser refuses the response)', async () => {
    const res = await ing.app.inject({
      method: 'OPTIONS',
      url: '/v1/ui',
      headers: { origin: 'https://evil.example.com', 'access-control-request-method': 'POST' },
    });
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});
