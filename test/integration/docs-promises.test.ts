import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { standardSources } from '../../src/shared/webhooks/standard.js';
import { listeningIngress, queueMetaWritten, type TestIngress } from '../helpers/ingress.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';
import { signedHeaders, webhookSecret } from '../helpers/webhooks.js';

/**
 * What the documentation promises about bad input, over real HTTP: a signed generic webhook
 * that is not JSON is 415, `webhook-id` is deduplicated per source (Standard Webhooks), a
 * `data:` file URL that is not base64 is refused at ingest, and an OPTIONS request that is not
 * a CORS preflight is answered in the error shape. Each refusal writes nothing.
 */

const CRM = webhookSecret();
const FORMS = webhookSecret();
const ORIGIN = 'https://app.example.com';
const API_TOKEN = 'an-api-token-of-at-least-32-characters-long';
const redis = testRedis('ingress');
const prefix = randomPrefix('promises');
let ing: TestIngress;
let base: string;
let store: ChatStore;

beforeAll(async () => {
  await waitReady(redis);
  let port: number;
  ({ ing, port } = await listeningIngress(redis, prefix, {
    apiToken: API_TOKEN,
    web: { tokenSecret: 'a-web-token-secret-of-at-least-32-characters', origins: [ORIGIN] },
    genericWebhooks: {
      sources: standardSources([
        { name: 'crm', secrets: [CRM] },
        { name: 'forms', secrets: [FORMS] },
      ]),
      replyPolicy: { allowHttp: false, hosts: [] },
    },
  }));
  base = `http://127.0.0.1:${port}`;
  store = ing.store;
  await queueMetaWritten(redis, prefix);
});
afterAll(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

let keysBefore: string[];
beforeEach(async () => {
  keysBefore = await keysUnder(redis, prefix);
});
const nothingWritten = async () => expect(await keysUnder(redis, prefix)).toEqual(keysBefore);

/** POST a signed generic webhook over HTTP; `contentType` replaces the signed request's. */
async function webhook(
  source: 'crm' | 'forms',
  body: unknown,
  opts: { id?: string; contentType?: string } = {},
): Promise<{ status: number; body: Record<string, unknown> & { error?: { code: string } } }> {
  const payload = JSON.stringify(body);
  const headers = signedHeaders(source === 'crm' ? CRM : FORMS, payload, opts.id ? { id: opts.id } : {});
  if (opts.contentType !== undefined) headers['content-type'] = opts.contentType;
  const res = await fetch(`${base}/webhooks/generic/${source}`, {
    method: 'POST',
    headers,
    body: payload,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const pendingIds = async (chatKey: string) => (await store.readAllPending(chatKey)).map((m) => m.id);

describe('a signed generic webhook that is not application/json', () => {
  it('is 415 UNSUPPORTED_MEDIA_TYPE, validly signed or not, and writes nothing', async () => {
    for (const contentType of [
      'text/plain',
      'text/plain; charset=utf-8',
      'application/x-www-form-urlencoded',
    ]) {
      const res = await webhook('crm', { chatKey: 'plain', text: 'hi' }, { contentType });
      expect([res.status, res.body.error?.code], String(contentType)).toEqual([
        415,
        'UNSUPPORTED_MEDIA_TYPE',
      ]);
    }
    await nothingWritten();
  });

  it('is accepted as application/json with a charset', async () => {
    const res = await webhook(
      'crm',
      { chatKey: 'plain', text: 'hi' },
      { contentType: 'application/json; charset=utf-8' },
    );
    expect(res.status).toBe(202);
  });
});

describe('webhook-id is deduplicated per source', () => {
  it('the same id for another chatKey is a duplicate, stored once, in the first chat', async () => {
    const first = await webhook('crm', { chatKey: 'dedup-a', text: 'once' }, { id: 'evt_1' });
    expect(first).toMatchObject({ status: 202, body: { status: 'accepted', chatKey: 'dedup-a' } });
    const again = await webhook('crm', { chatKey: 'dedup-b', text: 'once' }, { id: 'evt_1' });
    expect(again).toMatchObject({
      status: 202,
      body: { status: 'duplicate', chatKey: 'dedup-a', messageId: 'crm:evt_1' },
    });
    expect(await pendingIds('dedup-a')).toEqual(['crm:evt_1']);
    expect(await pendingIds('dedup-b')).toEqual([]);
  });

  it('another source may use the same id', async () => {
    const res = await webhook('forms', { chatKey: 'dedup-b', text: 'mine' }, { id: 'evt_1' });
    expect(res).toMatchObject({ status: 202, body: { status: 'accepted' } });
  });

  it('an id whose message was refused is not taken: nothing is written, and the id stays free', async () => {
    const parts = [{ type: 'file', mediaType: 'image/png', url: 'https://127.0.0.1/x.png' }];
    const refused = await webhook('crm', { chatKey: 'dedup-c', parts }, { id: 'evt_2' });
    expect([refused.status, refused.body.error?.code]).toEqual([400, 'FILE_URL_NOT_ALLOWED']);
    await nothingWritten();
    const next = await webhook('crm', { chatKey: 'dedup-d', text: 'fixed' }, { id: 'evt_2' });
    expect(next).toMatchObject({ status: 202, body: { status: 'accepted', chatKey: 'dedup-d' } });
  });
});

describe('a data: file URL', () => {
  const post = (url: string) =>
    fetch(`${base}/v1/chats/files/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_TOKEN}` },
      body: JSON.stringify({ text: 'look', parts: [{ type: 'file', mediaType: 'image/png', url }] }),
    });

  it('whose payload is not base64 is 400 FILE_URL_NOT_ALLOWED at ingest, and writes nothing', async () => {
    for (const url of [
      'data:image/png,hello%20world',
      'data:image/png,iVBORw0KGgo=',
      'data:image/png;base64,abcde',
      'data:image/png;base64,ab=c',
      'data:image/png;base64,abc==',
      'data:image/png;base64,iVBO%2BRw0=',
      'data:image/png;base64,iVBO Rw0=',
    ]) {
      const res = await post(url);
      expect([res.status, ((await res.json()) as { error?: { code: string } }).error?.code], url).toEqual([
        400,
        'FILE_URL_NOT_ALLOWED',
      ]);
    }
    await nothingWritten();
  });

  it('in base64, padded or not, is accepted', async () => {
    for (const url of ['data:image/png;base64,iVBORw0KGgo=', 'data:image/png;base64,iVBORw0KGgo']) {
      expect((await post(url)).status, url).toBe(202);
    }
  });
});

describe('OPTIONS', () => {
  it('that is not a CORS preflight is 400 BAD_REQUEST in the error shape', async () => {
    const incomplete: Array<Record<string, string>> = [
      {},
      { origin: ORIGIN },
      { 'access-control-request-method': 'POST' },
    ];
    for (const headers of incomplete) {
      const res = await fetch(`${base}/v1/ui`, { method: 'OPTIONS', headers });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('BAD_REQUEST');
    }
    await nothingWritten();
  });

  it('a preflight is still answered 204 with the CORS headers', async () => {
    const res = await fetch(`${base}/v1/ui`, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'POST' },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
  });
});
