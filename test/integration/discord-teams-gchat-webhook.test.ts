import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import {
  DISCORD_APPLICATION_ID,
  discordForwardedMessage,
  discordKeys,
  discordSignedHeaders,
  type FakeDiscord,
  startFakeDiscord,
} from '../helpers/fake-discord.js';
import { type PlatformStack, platformStack } from '../helpers/platform-stack.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/**
 * Discord end to end through `@chat-adapter/discord` (interactions signed with Ed25519;
 * messages as the adapter's Gateway listener forwards them; replies to a local fake of the
 * REST API, DISCORD_API_URL), and Microsoft Teams / Google Chat enabled with their webhook
 * verification refusing unsigned requests before anything is written. Teams and Google
 * Chat are not driven further: their adapters fetch OAuth tokens and signing keys from
 * Microsoft's and Google's identity endpoints, which no setting points at a local fake.
 */
const redis = testRedis();
const keys = discordKeys();
const BOT_TOKEN = 'discord-bot-token-for-tests';
let prefix: string;
let fake: FakeDiscord;
let stack: PlatformStack;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('dtg');
  fake = await startFakeDiscord();
  stack = await platformStack(redis, prefix, {
    DISCORD_BOT_TOKEN: BOT_TOKEN,
    DISCORD_PUBLIC_KEY: keys.publicKeyHex,
    DISCORD_APPLICATION_ID,
    DISCORD_API_URL: fake.apiUrl,
    TEAMS_APP_ID: '00000000-0000-4000-8000-000000000001',
    TEAMS_APP_PASSWORD: 'teams-client-secret',
    GOOGLE_CHAT_CREDENTIALS: JSON.stringify({
      client_email: 'bot@p.iam.gserviceaccount.com',
      private_key: 'k',
    }),
    GOOGLE_CHAT_PROJECT_NUMBER: '123456789012',
  });
});
afterEach(async () => {
  await stack.close();
  await fake.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

function post(platform: string, body: unknown, headers: Record<string, string>) {
  return stack.app.inject({
    method: 'POST',
    url: `/webhooks/${platform}`,
    headers,
    payload: JSON.stringify(body),
  });
}

const forwarded = (body: unknown, token = BOT_TOKEN) =>
  post('discord', body, { 'content-type': 'application/json', 'x-discord-gateway-token': token });

describe('webhook verification of Discord, Teams and Google Chat', () => {
  it('Discord: a signed PING gets PONG; a bad Ed25519 signature or gateway token is 401 and writes nothing', async () => {
    const ping = JSON.stringify({
      type: 1,
      id: '1',
      application_id: DISCORD_APPLICATION_ID,
      token: 't',
      version: 1,
    });
    const pong = await stack.app.inject({
      method: 'POST',
      url: '/webhooks/discord',
      headers: discordSignedHeaders(keys.privateKey, ping),
      payload: ping,
    });
    expect(pong.statusCode).toBe(200);
    expect(pong.json()).toEqual({ type: 1 });

    const before = await keysUnder(redis, prefix);
    const other = discordKeys();
    const forged = await stack.app.inject({
      method: 'POST',
      url: '/webhooks/discord',
      headers: discordSignedHeaders(other.privateKey, ping),
      payload: ping,
    });
    expect(forged.statusCode).toBe(401);
    expect(forged.json()).toMatchObject({ error: { code: 'INVALID_SIGNATURE' } });
    const message = discordForwardedMessage({ channelId: '1400', content: 'hi' });
    expect((await forwarded(message, 'stolen-guess')).statusCode).toBe(401);
    expect(await keysUnder(redis, prefix)).toEqual(before);
  });

  it('Teams: an activity without a Bot Framework token is 401 and writes nothing', async () => {
    const before = await keysUnder(redis, prefix);
    const activity = {
      type: 'message',
      id: 'act-1',
      text: 'hello',
      serviceUrl: 'https://smba.trafficmanager.net/amer/',
      from: { id: '29:user', name: 'Ana' },
      conversation: { id: 'a:1personal', conversationType: 'personal' },
      recipient: { id: '28:bot' },
      channelId: 'msteams',
    };
    const res = await post('teams', activity, { 'content-type': 'application/json' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: { code: 'INVALID_SIGNATURE' } });
    const forged = await post('teams', activity, {
      'content-type': 'application/json',
      authorization: 'Bearer not.a.jwt',
    });
    expect(forged.statusCode).toBe(401);
    expect(await keysUnder(redis, prefix)).toEqual(before);
  });

  it('Google Chat: an event without Google’s bearer token is 401 and writes nothing (no key fetch needed)', async () => {
    const before = await keysUnder(redis, prefix);
    const event = {
      type: 'MESSAGE',
      space: { name: 'spaces/AAA', type: 'DM' },
      message: { name: 'spaces/AAA/messages/m1', text: 'hello', sender: { name: 'users/1', type: 'HUMAN' } },
      user: { name: 'users/1', type: 'HUMAN' },
    };
    const res = await post('gchat', event, { 'content-type': 'application/json' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: { code: 'INVALID_SIGNATURE' } });
    // A request WITH a token is checked against Google's published certificates, fetched
    // from www.googleapis.com: not something a test may reach, so only the missing token is.
    expect(await keysUnder(redis, prefix)).toEqual(before);
  });
});

describe('Discord messages and replies', () => {
  it('a DM is ingested into discord-@me:<channel> and the reply is posted to that channel', async () => {
    const res = await forwarded(
      discordForwardedMessage({ channelId: '1400', content: 'hello there', id: '1500' }),
    );
    expect(res.statusCode).toBe(200);
    const chatKey = 'discord-@me:1400';
    const [message] = await stack.store.readAllPending(chatKey);
    expect(message?.parts).toEqual([{ type: 'text', text: 'hello there' }]);
    expect(message?.metadata).toMatchObject({
      channel: 'discord',
      chatId: '1400',
      messageId: '1500',
      extra: { chatType: 'dm' },
    });
    await stack.reply(chatKey, ['hi back']);
    await waitFor(async () => fake.posts().length === 1, { what: 'the post' });
    expect(fake.posts()[0]).toMatchObject({
      path: '/api/v10/channels/1400/messages',
      body: { content: 'hi back' },
    });
    expect(fake.posts()[0]!.headers.authorization).toBe(`Bot ${BOT_TOKEN}`);
  });

  it('GROUP_MODE=mentions: a guild message counts only with a mention, which opens a Discord thread for the reply', async () => {
    expect(
      (
        await forwarded(
          discordForwardedMessage({ guildId: '1300', channelId: '1400', content: 'chatter', id: '1501' }),
        )
      ).statusCode,
    ).toBe(200);
    expect(await stack.store.chatExists('discord-1300:1400')).toBe(false);
    const mention = discordForwardedMessage({
      guildId: '1300',
      channelId: '1400',
      content: `<@${DISCORD_APPLICATION_ID}> help`,
      id: '1502',
      mentionsBot: true,
    });
    expect((await forwarded(mention)).statusCode).toBe(200);
    // The adapter opened a thread on the message (the fake names it after the message id).
    const chatKey = 'discord-1300:1400:1502';
    expect(await stack.store.readAllPending(chatKey)).toHaveLength(1);
    await stack.reply(chatKey, ['in the thread']);
    await waitFor(async () => fake.posts().length === 1, { what: 'the post' });
    expect(fake.posts()[0]!.path).toBe('/api/v10/channels/1502/messages');
  });

  it('a 429 waits Discord’s retry_after; a 403 Missing Access is recorded as delivery.failed', async () => {
    await forwarded(discordForwardedMessage({ channelId: '1400', content: 'hi' }));
    const chatKey = 'discord-@me:1400';
    fake.scriptNext(/\/messages$/, {
      status: 429,
      headers: { 'retry-after': '1' },
      body: { message: 'You are being rate limited.', retry_after: 1, global: false },
    });
    await stack.reply(chatKey, ['after the limit']);
    await waitFor(async () => fake.posts().length === 2, { what: 'the retried post' });
    const [limited, retried] = fake.posts();
    expect(retried!.at - limited!.at).toBeGreaterThanOrEqual(950);

    fake.scriptNext(/\/messages$/, { status: 403, body: { message: 'Missing Access', code: 50001 } });
    const [denied] = await stack.reply(chatKey, ['denied']);
    expect(await stack.failedDeliveries(chatKey)).toEqual([
      expect.objectContaining({
        itemId: denied,
        channel: 'discord',
        attempts: 1,
        error: expect.stringContaining('50001'),
      }),
    ]);
  });
});
