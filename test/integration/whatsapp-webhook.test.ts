import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import {
  type FakeWhatsApp,
  graphError,
  startFakeWhatsApp,
  WHATSAPP_PHONE_NUMBER_ID,
  whatsappSignedHeaders,
  whatsappTextWebhook,
  whatsappWebhook,
} from '../helpers/fake-whatsapp.js';
import { type PlatformStack, platformStack } from '../helpers/platform-stack.js';
import { deletePrefix, keySizes, keysUnder, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/**
 * WhatsApp Cloud API end to end through `@chat-adapter/whatsapp`: Meta's verify-token GET
 * handshake, `X-Hub-Signature-256`-signed webhooks into chats, and replies through the
 * adapter to a local fake of the Graph API's /<phone number id>/messages (WHATSAPP_API_URL).
 */
const APP_SECRET = 'meta-app-secret-for-tests';
const VERIFY = 'verify-token-for-tests';
const USER = '15551234567';
const CHAT = `whatsapp-${WHATSAPP_PHONE_NUMBER_ID}:${USER}`;

const redis = testRedis();
let prefix: string;
let fake: FakeWhatsApp;
let stack: PlatformStack;

function post(body: unknown, headers?: Record<string, string>) {
  const payload = JSON.stringify(body);
  return stack.app.inject({
    method: 'POST',
    url: '/webhooks/whatsapp',
    headers: headers ?? whatsappSignedHeaders(APP_SECRET, payload),
    payload,
  });
}

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('wa');
  fake = await startFakeWhatsApp();
  stack = await platformStack(redis, prefix, {
    WHATSAPP_ACCESS_TOKEN: 'EAAG-test-token',
    WHATSAPP_APP_SECRET: APP_SECRET,
    WHATSAPP_PHONE_NUMBER_ID,
    WHATSAPP_VERIFY_TOKEN: VERIFY,
    WHATSAPP_API_URL: fake.url,
  });
});
afterEach(async () => {
  await stack.close();
  await fake.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('WhatsApp webhook verification', () => {
  it('echoes hub.challenge for the right verify token, 401 for a wrong one, writing nothing', async () => {
    const before = await keysUnder(redis, prefix);
    const ok = await stack.app.inject({
      method: 'GET',
      url: `/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=${VERIFY}&hub.challenge=1158201444`,
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toBe('1158201444');
    const wrong = await stack.app.inject({
      method: 'GET',
      url: '/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1',
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toMatchObject({ error: { code: 'INVALID_SIGNATURE' } });
    expect(await keysUnder(redis, prefix)).toEqual(before);
  });

  it('answers a bad X-Hub-Signature-256 401 INVALID_SIGNATURE and writes nothing', async () => {
    const before = await keysUnder(redis, prefix);
    const body = whatsappTextWebhook({ from: USER, text: 'hi' });
    const forged = whatsappSignedHeaders('other-secret', JSON.stringify(body));
    expect((await post(body, forged)).statusCode).toBe(401);
    const missing = await post(body, { 'content-type': 'application/json' });
    expect(missing.statusCode).toBe(401);
    expect(missing.json()).toMatchObject({ error: { code: 'INVALID_SIGNATURE' } });
    expect(await keysUnder(redis, prefix)).toEqual(before);
  });

  it('answers a signed body that is not JSON, or not a webhook’s shape, 400 INVALID_JSON and writes nothing', async () => {
    const before = await keysUnder(redis, prefix);
    for (const payload of ['{not json', JSON.stringify({ object: 'whatsapp_business_account' })]) {
      const res = await stack.app.inject({
        method: 'POST',
        url: '/webhooks/whatsapp',
        headers: whatsappSignedHeaders(APP_SECRET, payload),
        payload,
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: { code: 'INVALID_JSON' } });
    }
    expect(await keysUnder(redis, prefix)).toEqual(before);
  });

  it('takes no GET for a platform without a GET handshake', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/webhooks/slack?hub.challenge=1' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: { code: 'PLATFORM_NOT_ENABLED' } });
  });
});

describe('WhatsApp messages into chats', () => {
  it('ingests a text message into whatsapp-<phone number id>:<user> with its metadata', async () => {
    const res = await post(whatsappTextWebhook({ from: USER, text: 'hola', id: 'wamid.in1', name: 'Ana' }));
    expect(res.statusCode).toBe(200);
    const [message] = await stack.store.readAllPending(CHAT);
    expect(message?.parts).toEqual([{ type: 'text', text: 'hola' }]);
    expect(message?.metadata).toMatchObject({
      channel: 'whatsapp',
      chatId: USER,
      threadId: `whatsapp:${WHATSAPP_PHONE_NUMBER_ID}:${USER}`,
      userId: USER,
      username: 'Ana',
      messageId: 'wamid.in1',
      extra: { chatType: 'private', phoneNumberId: WHATSAPP_PHONE_NUMBER_ID },
    });
  });

  it('a redelivered message id answers 200 and writes nothing new', async () => {
    const body = whatsappTextWebhook({ from: USER, text: 'once', id: 'wamid.same' });
    expect((await post(body)).statusCode).toBe(200);
    const before = await keysUnder(redis, prefix);
    const counts = await keySizes(redis, before);
    expect((await post(body)).statusCode).toBe(200);
    expect(await keysUnder(redis, prefix)).toEqual(before);
    expect(await keySizes(redis, before)).toEqual(counts);
    expect(await stack.store.readAllPending(CHAT)).toHaveLength(1);
  });

  it('a delivery status update answers 200 and stores nothing', async () => {
    const status = whatsappWebhook({
      statuses: [{ id: 'wamid.out', status: 'delivered', timestamp: '1700000000', recipient_id: USER }],
    });
    expect((await post(status)).statusCode).toBe(200);
    expect(await stack.store.chatExists(CHAT)).toBe(false);
  });
});

describe('replies delivered to WhatsApp', () => {
  it('arrive at /<phone number id>/messages addressed to the user, in order', async () => {
    await post(whatsappTextWebhook({ from: USER, text: 'hi' }));
    await stack.reply(CHAT, ['one', 'two']);
    await waitFor(async () => fake.sends().length === 2, { what: 'two sends' });
    for (const send of fake.sends()) {
      expect(send.path).toBe(`/v25.0/${WHATSAPP_PHONE_NUMBER_ID}/messages`);
      expect(send.body).toMatchObject({ messaging_product: 'whatsapp', to: USER, type: 'text' });
      expect(send.headers.authorization).toBe('Bearer EAAG-test-token');
    }
    expect(fake.sends().map((s) => (s.body.text as { body: string }).body)).toEqual(['one', 'two']);
  });

  it('a throttled send (130429) is retried; a closed 24-hour window (131047) is recorded as delivery.failed', async () => {
    await post(whatsappTextWebhook({ from: USER, text: 'hi' }));
    fake.scriptNext(/\/messages$/, graphError(400, 130429, 'throughput reached'));
    await stack.reply(CHAT, ['throttled then sent']);
    await waitFor(async () => fake.sends().length === 2, { what: 'the throttled item sent again' });
    fake.scriptNext(/\/messages$/, graphError(400, 131047, 're-engagement message'));
    const [second] = await stack.reply(CHAT, ['outside the window']);
    expect(await stack.failedDeliveries(CHAT)).toEqual([
      expect.objectContaining({
        itemId: second,
        channel: 'whatsapp',
        attempts: 1,
        error: expect.stringContaining('131047'),
      }),
    ]);
    const texts = fake.sends().map((s) => (s.body.text as { body: string }).body);
    expect(texts).toEqual(['throttled then sent', 'throttled then sent', 'outside the window']);
  });
});
