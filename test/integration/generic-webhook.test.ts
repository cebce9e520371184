import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { standardSources } from '../../src/shared/webhooks/standard.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { textOf } from '../helpers/messages.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';
import { signedHeaders, webhookSecret } from '../helpers/webhooks.js';

const OLD = webhookSecret();
const NEW = webhookSecret();
const OTHER = webhookSecret();

const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('gwh');
  ing = await testIngress(redis, prefix, {
    limits: { bodyLimitBytes: 4096 },
    genericWebhooks: {
      // `crm` is mid-rotation: NEW is current, OLD still accepted.
      sources: standardSources([
        { name: 'crm', secrets: [NEW, OLD] },
        { name: 'forms', secrets: [OTHER] },
      ]),
      replyPolicy: { allowHttp: false, hosts: [] },
    },
  });
  await queueMetaWritten(redis, prefix);
});
afterEach(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

interface Signed {
  id?: string;
  /** Seconds since the epoch; default now. */
  timestamp?: number;
  secret?: string;
  /** Sent instead of the signed body (a tampered payload). */
  tamper?: string;
  headers?: Record<string, string | undefined>;
}

/** POST a body signed by the `standardwebhooks` package itself, as a sender would. */
function post(source: string, body: unknown, opts: Signed = {}) {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  const headers = signedHeaders(opts.secret ?? NEW, payload, opts);
  for (const [k, v] of Object.entries(opts.headers ?? {})) {
    if (v === undefined) delete headers[k];
    else headers[k] = v;
  }
  return ing.app.inject({
    method: 'POST',
    url: `/webhooks/generic/${source}`,
    headers,
    payload: opts.tamper ?? payload,
  });
}

const keys = () => keysUnder(redis, prefix);

/** Runs `fn` and checks that the keyspace (every key under the prefix) did not change. */
async function writesNothing(fn: () => Promise<{ statusCode: number; json(): { error: { code: string } } }>) {
  const before = await keys();
  const res = await fn();
  const after = await keys();
  expect(after.filter((k) => !before.includes(k))).toEqual([]);
  expect(after).toEqual(before);
  return { status: res.statusCode, code: res.json().error?.code };
}

describe('POST /webhooks/generic/:source', () => {
  it('stores a message signed with the source’s secret, keyed by the webhook-id, and enqueues the turn', async () => {
    const res = await post(
      'crm',
      { chatKey: 'ticket-42', text: 'my order is late', user: { id: 'c-7', name: 'Dana' } },
      { id: 'msg_abc' },
    );
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ chatKey: 'ticket-42', messageId: 'crm:msg_abc', status: 'accepted' });
    const [message] = await ing.store.readAllPending('ticket-42');
    expect(textOf(message!)).toBe('my order is late');
    expect(message!.metadata).toMatchObject({
      channel: 'generic',
      userId: 'c-7',
      username: 'Dana',
      extra: { source: 'crm', webhookId: 'msg_abc' },
    });
    expect((await ing.turns.getJobs(['waiting'])).map((j) => j.data)).toEqual([{ chatKey: 'ticket-42' }]);
    // The sender's user joins the contact book, like every ingested message with a username.
    expect(await ing.app.chatlane.contacts.lookup('dana')).toEqual([
      expect.objectContaining({ username: 'Dana', chatKey: 'ticket-42', channel: 'generic', userId: 'c-7' }),
    ]);
  });

  it('records replyTo.url as the chat’s reply route', async () => {
    const res = await post('crm', {
      chatKey: 'ticket-42',
      parts: [{ type: 'text', text: 'hi' }],
      replyTo: { url: 'https://crm.example.com/hooks/chatlane' },
    });
    expect(res.statusCode).toBe(202);
    const state = await new DeliveryStore(redis, prefix, 100).state('ticket-42');
    expect(state).toEqual({
      route: { channel: 'generic', source: 'crm', url: 'https://crm.example.com/hooks/chatlane' },
      deliveredTo: '0-0',
    });
  });

  it('accepts the old and the new secret while a rotation is under way', async () => {
    expect((await post('crm', { chatKey: 'c1', text: 'new' }, { secret: NEW })).statusCode).toBe(202);
    expect((await post('crm', { chatKey: 'c1', text: 'old' }, { secret: OLD })).statusCode).toBe(202);
    expect(await ing.store.pendingCount('c1')).toBe(2);
  });

  it('answers a replayed webhook-id with a valid signature as a duplicate and stores nothing new', async () => {
    const first = await post('crm', { chatKey: 'c1', text: 'once' }, { id: 'msg_replay' });
    expect(first.json().status).toBe('accepted');
    const before = await keys();
    const again = await post('crm', { chatKey: 'c1', text: 'once' }, { id: 'msg_replay' });
    expect(again.statusCode).toBe(202);
    expect(again.json()).toEqual({ chatKey: 'c1', messageId: 'crm:msg_replay', status: 'duplicate' });
    expect(await keys()).toEqual(before);
    expect(await ing.store.pendingCount('c1')).toBe(1);
  });

  it('scopes webhook-ids by source: the same id from two sources is two messages', async () => {
    await post('crm', { chatKey: 'c1', text: 'a' }, { id: 'msg_same' });
    await post('forms', { chatKey: 'c1', text: 'b' }, { id: 'msg_same', secret: OTHER });
    expect(await ing.store.pendingCount('c1')).toBe(2);
  });

  it('takes a body without a content-type: the signature, not the header, says what it is', async () => {
    const res = await post('crm', { chatKey: 'c1', text: 'hi' }, { headers: { 'content-type': undefined } });
    expect(res.statusCode).toBe(202);
  });
});

describe('POST /webhooks/generic/:source refuses bad input and writes nothing', () => {
  const body = { chatKey: 'c1', text: 'hello' };

  it('a tampered body: 401 INVALID_SIGNATURE', async () => {
    const tampered = JSON.stringify({ ...body, text: 'hello!' });
    expect(await writesNothing(() => post('crm', body, { tamper: tampered }))).toEqual({
      status: 401,
      code: 'INVALID_SIGNATURE',
    });
  });

  it('a secret of another source: 401 INVALID_SIGNATURE', async () => {
    expect(await writesNothing(() => post('crm', body, { secret: OTHER }))).toEqual({
      status: 401,
      code: 'INVALID_SIGNATURE',
    });
  });

  it('a timestamp older than five minutes, or as far ahead: 401 TIMESTAMP_OUT_OF_TOLERANCE', async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const timestamp of [now - 6 * 60, now + 6 * 60]) {
      expect(await writesNothing(() => post('crm', body, { timestamp }))).toEqual({
        status: 401,
        code: 'TIMESTAMP_OUT_OF_TOLERANCE',
      });
    }
  });

  it('a replay of a once-accepted message after the tolerance: 401, nothing new', async () => {
    const old = Math.floor(Date.now() / 1000) - 10 * 60;
    expect(await writesNothing(() => post('crm', body, { id: 'msg_late', timestamp: old }))).toEqual({
      status: 401,
      code: 'TIMESTAMP_OUT_OF_TOLERANCE',
    });
  });

  it('missing or malformed webhook headers: 401 INVALID_SIGNATURE', async () => {
    for (const headers of [
      { 'webhook-signature': undefined },
      { 'webhook-id': undefined },
      { 'webhook-timestamp': undefined },
      { 'webhook-timestamp': 'yesterday' },
      { 'webhook-signature': 'v1,bm90IGEgc2lnbmF0dXJl' },
    ]) {
      expect(await writesNothing(() => post('crm', body, { headers })), JSON.stringify(headers)).toEqual({
        status: 401,
        code: 'INVALID_SIGNATURE',
      });
    }
  });

  it('a signed body that is not JSON: 400 INVALID_JSON', async () => {
    expect(await writesNothing(() => post('crm', '{"chatKey": "c1", "text": '))).toEqual({
      status: 400,
      code: 'INVALID_JSON',
    });
  });

  it('a signed body that breaks the schema: 400 VALIDATION_FAILED', async () => {
    for (const bad of [
      { chatKey: 'c1' },
      { chatKey: 'a b', text: 'x' },
      { chatKey: 'c1', text: 'x', extra: 1 },
      { chatKey: 'c1', text: 'x', user: { id: 5 } },
      { chatKey: 'c1', text: 'x', replyTo: { url: 5 } },
      [1, 2, 3],
    ]) {
      expect(await writesNothing(() => post('crm', bad)), JSON.stringify(bad)).toEqual({
        status: 400,
        code: 'VALIDATION_FAILED',
      });
    }
  });

  it('a webhook-id outside the id alphabet: 400 VALIDATION_FAILED', async () => {
    expect(await writesNothing(() => post('crm', body, { id: 'msg {braces}' }))).toEqual({
      status: 400,
      code: 'VALIDATION_FAILED',
    });
  });

  it('a reply URL the policy refuses: 400 REPLY_URL_NOT_ALLOWED', async () => {
    for (const url of [
      'http://crm.example.com/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://127.0.0.1:6379/',
      'https://[::1]/x',
      'https://localhost/x',
      'not a url',
    ]) {
      expect(await writesNothing(() => post('crm', { ...body, replyTo: { url } })), url).toEqual({
        status: 400,
        code: 'REPLY_URL_NOT_ALLOWED',
      });
    }
  });

  it('a body over the limit: 413 BODY_TOO_LARGE', async () => {
    expect(await writesNothing(() => post('crm', { chatKey: 'c1', text: 'x'.repeat(5000) }))).toEqual({
      status: 413,
      code: 'BODY_TOO_LARGE',
    });
  });

  it('an unknown source: 404 UNKNOWN_SOURCE', async () => {
    expect(await writesNothing(() => post('billing', body))).toEqual({ status: 404, code: 'UNKNOWN_SOURCE' });
  });
});

describe('the JSON API next to the raw webhook parser', () => {
  it('still parses JSON bodies itself and still refuses text/plain', async () => {
    const ok = await ing.app.inject({
      method: 'POST',
      url: '/v1/chats/c1/messages',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ text: 'hi' }),
    });
    expect(ok.statusCode).toBe(202);
    const plain = await ing.app.inject({
      method: 'POST',
      url: '/v1/chats/c1/messages',
      headers: { 'content-type': 'text/plain' },
      payload: 'hi',
    });
    expect(plain.statusCode).toBe(415);
  });
});
