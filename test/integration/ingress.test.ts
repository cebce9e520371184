import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { REDIS_UNAVAILABLE_MESSAGE } from '../../src/ingress/validation.js';
import { waitReady } from '../../src/shared/redis.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { textOf } from '../helpers/messages.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';

const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;

beforeAll(() => waitReady(redis));

beforeEach(async () => {
  prefix = randomPrefix('ing');
  ing = await testIngress(redis, prefix, { limits: { maxPendingPerChat: 3 } });
});
afterEach(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const post = (chatKey: string, payload: unknown, headers: Record<string, string> = {}) =>
  ing.app.inject({
    method: 'POST',
    url: `/v1/chats/${chatKey}/messages`,
    headers: { 'content-type': 'application/json', ...headers },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });

/** Chat-level keys (not BullMQ's queue bookkeeping) written under this test's prefix. */
const chatKeysWritten = async () =>
  (await keysUnder(redis, prefix)).filter((k) => k.includes(':{c:') || k.endsWith(':chats'));

describe('POST /v1/chats/:chatKey/messages', () => {
  it('stores the message, enqueues one turn job for the chat and answers 202 accepted', async () => {
    const res = await post('alice', {
      id: 'm1',
      text: 'hello',
      metadata: { userId: 'u1', username: 'Alice' },
    });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ chatKey: 'alice', messageId: 'm1', status: 'accepted' });
    const pending = await ing.store.readAllPending('alice');
    expect(pending).toHaveLength(1);
    expect(pending[0]).toMatchObject({
      id: 'm1',
      role: 'user',
      metadata: { chatKey: 'alice', userId: 'u1', username: 'Alice', channel: 'api' },
    });
    expect(textOf(pending[0]!)).toBe('hello');
    const jobs = await ing.turns.getJobs(['waiting', 'delayed', 'active']);
    expect(jobs.map((j) => j.data)).toEqual([{ chatKey: 'alice' }]);
  });

  it('answers duplicate for a repeated id and writes it once', async () => {
    expect((await post('alice', { id: 'm1', text: 'hello' })).json().status).toBe('accepted');
    const again = await post('alice', { id: 'm1', text: 'hello again' });
    expect(again.statusCode).toBe(202);
    expect(again.json().status).toBe('duplicate');
    expect(await ing.store.pendingCount('alice')).toBe(1);
    expect(await ing.turns.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });

  it('gives a message without id a fresh one and accepts parts', async () => {
    const res = await post('bob', {
      parts: [
        { type: 'text', text: 'a' },
        { type: 'file', mediaType: 'image/png', url: 'https://example.com/x.png' },
      ],
    });
    expect(res.statusCode).toBe(202);
    const { messageId } = res.json();
    expect(messageId).toMatch(/^[0-9a-f-]{36}$/);
    const [m] = await ing.store.readAllPending('bob');
    expect(m?.parts).toHaveLength(2);
  });

  it('enqueues one job per chat however many messages arrive while it waits', async () => {
    for (let i = 0; i < 3; i++) await post('alice', { id: `m${i}`, text: `t${i}` });
    await post('bob', { id: 'b', text: 'b' });
    const jobs = await ing.turns.getJobs(['waiting']);
    expect(jobs.map((j) => j.data.chatKey).sort()).toEqual(['alice', 'bob']);
  });

  it('answers 429 CHAT_FULL at MAX_PENDING_PER_CHAT and stores nothing more', async () => {
    for (let i = 0; i < 3; i++)
      expect((await post('alice', { id: `m${i}`, text: 'x' })).statusCode).toBe(202);
    const res = await post('alice', { id: 'm3', text: 'x' });
    expect(res.statusCode).toBe(429);
    expect(res.json().error.code).toBe('CHAT_FULL');
    expect(await ing.store.pendingCount('alice')).toBe(3);
    // The refused id was not remembered: it is accepted once there is room.
    expect((await ing.store.readAllPending('alice')).map((m) => m.id)).toEqual(['m0', 'm1', 'm2']);
  });
});

describe('bad input is refused whole', () => {
  const cases: Array<
    [
      string,
      () => Promise<{ statusCode: number; json: () => { error: { code: string; message: string } } }>,
      number,
      string,
      RegExp?,
    ]
  > = [
    ['malformed JSON', () => post('alice', '{"text": "hi"'), 400, 'INVALID_JSON'],
    ['empty JSON body', () => post('alice', ''), 400, 'INVALID_JSON'],
    ['text of the wrong type', () => post('alice', { text: 42 }), 400, 'VALIDATION_FAILED', /^text:/],
    ['neither text nor parts', () => post('alice', { id: 'x' }), 400, 'VALIDATION_FAILED', /text or parts/],
    ['an unknown field', () => post('alice', { text: 'hi', role: 'assistant' }), 400, 'VALIDATION_FAILED'],
    [
      'a bad part',
      () => post('alice', { parts: [{ type: 'tool-x', input: {} }] }),
      400,
      'VALIDATION_FAILED',
      /^parts\.0/,
    ],
    ['an id with braces', () => post('alice', { id: 'a{b}', text: 'hi' }), 400, 'VALIDATION_FAILED', /^id:/],
    ['an illegal chatKey', () => post('a%7Bb%7D', { text: 'hi' }), 400, 'INVALID_CHAT_KEY'],
    ['a chatKey over 200 chars', () => post('x'.repeat(201), { text: 'hi' }), 400, 'INVALID_CHAT_KEY'],
    ['a body over the limit', () => post('alice', { text: 'x'.repeat(300 * 1024) }), 413, 'BODY_TOO_LARGE'],
    [
      'a non-JSON content type',
      () =>
        ing.app.inject({
          method: 'POST',
          url: '/v1/chats/alice/messages',
          headers: { 'content-type': 'text/plain' },
          payload: 'hi',
        }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
  ];

  for (const [name, send, status, code, message] of cases) {
    it(`answers ${status} ${code} for ${name} and writes nothing`, async () => {
      const res = await send();
      expect(res.statusCode).toBe(status);
      const body = res.json();
      expect(body.error.code).toBe(code);
      expect(body.error.message.length).toBeGreaterThan(0);
      if (message) expect(body.error.message).toMatch(message);
      expect(await chatKeysWritten()).toEqual([]);
      expect(await ing.turns.getJobCounts('waiting')).toEqual({ waiting: 0 });
    });
  }
});

describe('bearer token', () => {
  it('answers 401 without or with a wrong token and 202 with the right one, writing only then', async () => {
    const secured = await testIngress(redis, prefix, { apiToken: 's3cret' });
    try {
      const send = (headers: Record<string, string>) =>
        secured.app.inject({
          method: 'POST',
          url: '/v1/chats/alice/messages',
          headers: { 'content-type': 'application/json', ...headers },
          payload: { text: 'hi' },
        });
      const missing = await send({});
      expect(missing.statusCode).toBe(401);
      expect(missing.json().error.code).toBe('UNAUTHORIZED');
      expect((await send({ authorization: 'Bearer nope' })).statusCode).toBe(401);
      expect((await secured.app.inject({ method: 'GET', url: '/v1/chats/alice/messages' })).statusCode).toBe(
        401,
      );
      expect(await chatKeysWritten()).toEqual([]);
      expect((await send({ authorization: 'Bearer s3cret' })).statusCode).toBe(202);
      // Health endpoints stay open for probes.
      expect((await secured.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await secured.close();
    }
  });
});

describe('GET /v1/chats/:chatKey/messages', () => {
  it('lists history in order, then pending messages', async () => {
    await post('alice', { id: 'p1', text: 'pending one' });
    const k = ing.store.keys('alice');
    await redis.rpush(
      k.hist,
      JSON.stringify({
        id: 'h1',
        role: 'user',
        parts: [{ type: 'text', text: 'old' }],
        metadata: { ts: 1, chatKey: 'alice', kind: 'normal' },
      }),
    );
    const res = await ing.app.inject({ method: 'GET', url: '/v1/chats/alice/messages' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.chatKey).toBe('alice');
    expect(body.messages.map((m: { id: string }) => m.id)).toEqual(['h1']);
    expect(body.pending.map((m: { id: string }) => m.id)).toEqual(['p1']);
  });

  it('answers an unknown chat with empty lists', async () => {
    const res = await ing.app.inject({ method: 'GET', url: '/v1/chats/nobody/messages' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ chatKey: 'nobody', messages: [], pending: [] });
  });

  it('refuses an illegal chatKey', async () => {
    const res = await ing.app.inject({ method: 'GET', url: '/v1/chats/a%20b/messages' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('INVALID_CHAT_KEY');
  });
});

describe('GET /v1/chats/:chatKey/outbox', () => {
  it('pages through replies oldest first with the next cursor', async () => {
    const lease = await ing.store.acquire('alice', 'w', 5000);
    if (!lease.ok) throw new Error('busy');
    for (const text of ['one', 'two', 'three'])
      await ing.store.sendOutbox('alice', lease.fence, { runId: 'r1', text, ts: 5 });
    const first = (await ing.app.inject({ method: 'GET', url: '/v1/chats/alice/outbox?limit=2' })).json();
    expect(first.items.map((i: { text: string }) => i.text)).toEqual(['one', 'two']);
    expect(first.items[0]).toMatchObject({ runId: 'r1', ts: 5 });
    const second = (
      await ing.app.inject({ method: 'GET', url: `/v1/chats/alice/outbox?after=${first.next}` })
    ).json();
    expect(second.items.map((i: { text: string }) => i.text)).toEqual(['three']);
    const empty = (
      await ing.app.inject({ method: 'GET', url: `/v1/chats/alice/outbox?after=${second.next}` })
    ).json();
    expect(empty).toEqual({ items: [], next: second.next });
  });

  it('refuses a malformed cursor or limit with 400', async () => {
    for (const [q, code] of [
      ['after=abc', 'INVALID_CURSOR'],
      ['limit=0', 'VALIDATION_FAILED'],
      ['limit=5000', 'VALIDATION_FAILED'],
      ['bogus=1', 'VALIDATION_FAILED'],
    ]) {
      const res = await ing.app.inject({ method: 'GET', url: `/v1/chats/alice/outbox?${q}` });
      expect(res.statusCode, q).toBe(400);
      expect(res.json().error.code, q).toBe(code);
    }
  });
});

describe('health', () => {
  it('is live and ready with Redis up, and not ready while shutting down', async () => {
    expect((await ing.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect((await ing.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    ing.app.chatlane.lifecycle.shuttingDown = true;
    const ready = await ing.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json().error.code).toBe('SHUTTING_DOWN');
    const res = await post('alice', { text: 'hi' });
    expect(res.statusCode).toBe(503);
    expect(await chatKeysWritten()).toEqual([]);
  });
});

describe('Redis unavailable', () => {
  it('answers 503 REDIS_UNAVAILABLE quickly instead of hanging', async () => {
    // Nothing listens on port 1: the fail-fast connection never becomes ready.
    const dead = new Redis('redis://127.0.0.1:1', {
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      lazyConnect: true,
      retryStrategy: () => 200,
    });
    dead.on('error', () => undefined);
    const down = await testIngress(dead, prefix);
    try {
      const started = Date.now();
      const res = await down.app.inject({
        method: 'POST',
        url: '/v1/chats/alice/messages',
        headers: { 'content-type': 'application/json' },
        payload: { text: 'hi' },
      });
      expect(res.statusCode).toBe(503);
      // A fixed message: the Redis error stays in the log.
      expect(res.json()).toEqual({
        error: { code: 'REDIS_UNAVAILABLE', message: REDIS_UNAVAILABLE_MESSAGE },
      });
      expect(Date.now() - started).toBeLessThan(5000);
      const ready = await down.app.inject({ method: 'GET', url: '/readyz' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toEqual({
        error: { code: 'REDIS_UNAVAILABLE', message: 'redis is not reachable' },
      });
    } finally {
      await down.app.close();
      dead.disconnect();
    }
  });
});
