import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseMarkdownV2 } from '../../src/fake-telegram/markdown-v2.js';
import { BOT, FakeTelegram, messageUpdate } from '../../src/fake-telegram/server.js';
import { waitReady } from '../../src/shared/redis.js';
import {
  DISCORD_APPLICATION_ID,
  DISCORD_CONTENT_LIMIT,
  discordForwardedMessage,
  discordKeys,
  startFakeDiscord,
} from '../helpers/fake-discord.js';
import { startFakeGChat } from '../helpers/fake-gchat.js';
import { slackEventEnvelope, slackSignedHeaders, startFakeSlack } from '../helpers/fake-slack.js';
import {
  startFakeWhatsApp,
  WHATSAPP_CHAT,
  WHATSAPP_TEXT_LIMIT,
  whatsappEnv,
  whatsappSays,
} from '../helpers/fake-whatsapp.js';
import { longAnswer, sentenceNumbers, upTo } from '../helpers/long-answer.js';
import { userMessage } from '../helpers/messages.js';
import { type PlatformStack, platformStack } from '../helpers/platform-stack.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { TELEGRAM_SECRET, telegramHeaders } from '../helpers/telegram.js';

/**
 * Replies as each platform's users receive them, end to end: a message comes in through the
 * platform's webhook (real adapter, real signature), a reply is written to the chat's outbox
 * as a turn writes it, and the delivery worker posts it through the real adapter to a local
 * fake of the platform's API, which refuses what the platform refuses (text past its limit,
 * MarkdownV2 Telegram cannot parse).
 */
const redis = testRedis();
let prefix: string;
let stack: PlatformStack | undefined;
const closers: Array<() => Promise<void>> = [];

beforeAll(() => waitReady(redis));
beforeEach(() => {
  prefix = randomPrefix('preplies');
});
afterEach(async () => {
  await stack?.close();
  stack = undefined;
  for (const close of closers.splice(0)) await close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const numbers = sentenceNumbers;
const count = (text: string) => numbers([text]).length;

const CITED = 'list [1] first point\n\nmath 2*3*4 and a_b_c\n\nsee [the docs](https://example.com/x)';

describe('WhatsApp', () => {
  const CHAT = WHATSAPP_CHAT;

  async function whatsapp() {
    const fake = await startFakeWhatsApp();
    closers.push(fake.close);
    stack = await platformStack(redis, prefix, whatsappEnv(fake));
    expect(await whatsappSays(stack.app)).toBe(200);
    return fake;
  }

  it('a reply with [1], 2*3*4 and a Markdown link arrives with no backslash, no &#, and the link as text and URL', async () => {
    const fake = await whatsapp();
    await stack!.reply(CHAT, [CITED]);
    await waitFor(async () => fake.texts().length === 1, { what: 'the reply' });
    const [text] = fake.texts();
    expect(text).not.toContain('\\');
    expect(text).not.toContain('&#');
    expect(text).toBe('list [1] first point\n\nmath 2*3*4 and a_b_c\n\nsee the docs (https://example.com/x)');
  });

  it('a 7,000-character answer arrives whole, in order, each message within 4,096 characters', async () => {
    const fake = await whatsapp();
    const answer = longAnswer(7000);
    const [id] = await stack!.reply(CHAT, [answer, 'and a short one after it']);
    await waitFor(async () => fake.texts().at(-1) === 'and a short one after it', { what: 'both replies' });
    const texts = fake.texts();
    expect(texts.length).toBe(3);
    for (const text of texts) expect(text.length).toBeLessThanOrEqual(WHATSAPP_TEXT_LIMIT);
    expect(numbers(texts)).toEqual(upTo(count(answer)));
    // Nothing was refused along the way, and the record says how many messages the item took.
    expect(fake.sends()).toHaveLength(3);
    const events = await stack!.store.readEvents(CHAT, undefined, 100);
    expect(events.filter((e) => e.type === 'delivery.split').map((e) => e.data)).toEqual([
      { itemId: id, channel: 'whatsapp', parts: 2, format: 'whatsapp.1' },
    ]);
  });

  it('GET /outbox says how many messages a long answer went out as, the number WhatsApp received; a short one has no parts', async () => {
    const fake = await whatsapp();
    const [long, short] = await stack!.reply(CHAT, [longAnswer(10_000), 'and a short one after it']);
    // Both items delivered: the cursor is past the short one too.
    await waitFor(async () => (await stack!.store.readMeta(CHAT)).deliveredTo === short, {
      what: 'both replies delivered',
    });
    const received = fake.texts().length - 1;
    expect(received).toBeGreaterThanOrEqual(3);
    const res = await stack!.app.inject({
      method: 'GET',
      url: `/v1/chats/${encodeURIComponent(CHAT)}/outbox`,
    });
    expect(res.statusCode).toBe(200);
    const items = (res.json() as { items: Array<{ id: string; parts?: number }> }).items;
    expect(items.map((item) => item.id)).toEqual([long, short]);
    expect(items[0]!.parts).toBe(received);
    expect(items[1]).not.toHaveProperty('parts');
  });
});

describe('Discord', () => {
  it('a 7,000-character answer arrives whole, in order, each message within 2,000 characters', async () => {
    const fake = await startFakeDiscord();
    closers.push(fake.close);
    stack = await platformStack(redis, prefix, {
      DISCORD_BOT_TOKEN: 'discord-bot-token-for-tests',
      DISCORD_PUBLIC_KEY: discordKeys().publicKeyHex,
      DISCORD_APPLICATION_ID,
      DISCORD_API_URL: fake.apiUrl,
    });
    const message = JSON.stringify(discordForwardedMessage({ channelId: '1400', content: 'hi', id: '1500' }));
    const res = await stack.app.inject({
      method: 'POST',
      url: '/webhooks/discord',
      headers: {
        'content-type': 'application/json',
        'x-discord-gateway-token': 'discord-bot-token-for-tests',
      },
      payload: message,
    });
    expect(res.statusCode).toBe(200);
    const answer = `Thanks @alice!\n\n${longAnswer(7000)}`;
    await stack.reply('discord-@me:1400', [answer]);
    const all = count(answer);
    await waitFor(async () => numbers(fake.posts().map((p) => String(p.body.content))).at(-1) === all - 1, {
      what: 'the whole answer',
    });
    const contents = fake.posts().map((p) => String(p.body.content));
    expect(contents.length).toBeGreaterThanOrEqual(4);
    for (const content of contents) expect(content.length).toBeLessThanOrEqual(DISCORD_CONTENT_LIMIT);
    expect(contents.some((c) => c.endsWith('...'))).toBe(false);
    expect(numbers(contents)).toEqual(upTo(all));
    // A name stays a name (the adapter alone would post `<@alice>`).
    expect(contents[0]).toMatch(/^Thanks @alice!/);
  });
});

describe('Telegram', () => {
  const CHAT_ID = 4301;
  const CHAT = `telegram-chat-${CHAT_ID}`;

  async function telegram(fake: FakeTelegram) {
    closers.push(() => fake.close());
    stack = await platformStack(
      redis,
      prefix,
      {
        TELEGRAM_BOT_TOKEN: BOT.token,
        TELEGRAM_WEBHOOK_SECRET_TOKEN: TELEGRAM_SECRET,
        TELEGRAM_API_BASE_URL: fake.url,
      },
      { groupMode: 'all' },
    );
    const res = await stack.app.inject({
      method: 'POST',
      url: '/webhooks/telegram',
      headers: telegramHeaders(),
      payload: JSON.stringify(messageUpdate({ chatId: CHAT_ID, text: 'hi' })),
    });
    expect(res.statusCode).toBe(200);
  }

  it('keeps its rich-message path: the Markdown as written, one message up to 32,768 characters, then several', async () => {
    const fake = await new FakeTelegram().start();
    await telegram(fake);
    const medium = longAnswer(6920);
    const huge = longAnswer(40_000);
    await stack!.reply(CHAT, [CITED, medium, huge]);
    await waitFor(
      async () => numbers(fake.sentTo(CHAT_ID).map((s) => s.text)).length === count(medium) + count(huge),
      {
        what: 'every reply',
        timeoutMs: 20_000,
      },
    );
    const sent = fake.sentTo(CHAT_ID);
    expect(sent.every((s) => s.method === 'sendRichMessage')).toBe(true);
    expect(sent[0]!.text).toBe(CITED);
    expect(sent[1]!.text).toBe(medium);
    expect(sent.length).toBe(4);
    for (const s of sent.slice(2)) expect(s.text.length).toBeLessThanOrEqual(32_768);
    expect(numbers(sent.slice(2).map((s) => s.text))).toEqual(upTo(count(huge)));
    expect(fake.refused).toEqual([]);
  });

  it('without rich messages (Bot API before 10.1): valid MarkdownV2, 4,096 characters a message, nothing refused', async () => {
    const fake = await new FakeTelegram({ richMessages: false }).start();
    await telegram(fake);
    const answer = longAnswer(7000);
    await stack!.reply(CHAT, [answer, CITED, '# **Report** for `v1.2` (draft)']);
    await waitFor(async () => fake.sentTo(CHAT_ID).at(-1)?.text.startsWith('*Report') === true, {
      what: 'every reply',
    });
    // The first reply went to sendRichMessage as one message, which this Bot API does not
    // have (404): it went as MarkdownV2 messages instead, split to 4,096 (the adapter alone
    // would have sent the first 4,096 characters and "..."). The adapter remembered, so the
    // later replies went straight to sendMessage.
    const sent = fake.sentTo(CHAT_ID);
    expect(sent.length).toBe(4);
    for (const s of sent) {
      expect(s).toMatchObject({ method: 'sendMessage', parseMode: 'MarkdownV2' });
      expect(parseMarkdownV2(s.text).ok).toBe(true);
      expect(s.text.length).toBeLessThanOrEqual(4096);
    }
    expect(numbers(sent.slice(0, 2).map((s) => s.text))).toEqual(upTo(count(answer)));
    expect(sent[2]!.text).toBe(
      'list \\[1\\] first point\n\nmath 2\\*3\\*4 and a\\_b\\_c\n\nsee [the docs](https://example.com/x)',
    );
    expect(sent[3]!.text).toBe('*Report for *`v1.2`* \\(draft\\)*');
    expect(fake.refused).toEqual([]);
  });
});

describe('Google Chat', () => {
  const saved: Record<string, string | undefined> = {};
  afterEach(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it('a 7,000-character answer arrives whole, in order, each message within 4,096 characters, a link as <url|text>', async () => {
    const fake = await startFakeGChat();
    closers.push(fake.close);
    // Read by Google's auth library itself (Application Default Credentials), as in production.
    for (const [name, value] of Object.entries(fake.adcEnv)) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
    stack = await platformStack(redis, prefix, {
      GOOGLE_CHAT_USE_ADC: 'true',
      GOOGLE_CHAT_PROJECT_NUMBER: '123456789012',
      GOOGLE_CHAT_API_URL: fake.apiUrl,
    });
    // Google Chat's incoming events need Google's certificates: the chat's route is set directly.
    const chatKey = 'gchat-spaces_2fAAAAreplies';
    await stack.store.ingest(
      chatKey,
      userMessage(chatKey, 'm1', 'hi'),
      { maxPending: 10, dedupWindowMs: 60_000 },
      {
        channel: 'gchat',
        threadId: 'gchat:spaces/AAAAreplies',
      },
    );
    const answer = longAnswer(7000);
    await stack.reply(chatKey, [CITED, answer]);
    await waitFor(
      async () => numbers(fake.posts().map((p) => String(p.body.text))).length === count(answer),
      {
        what: 'both replies',
      },
    );
    const texts = fake.posts().map((p) => String(p.body.text));
    expect(texts[0]).toBe(
      'list [1] first point\n\nmath 2*3*4 and a_b_c\n\nsee <https://example.com/x|the docs>',
    );
    expect(texts.length).toBeGreaterThanOrEqual(3);
    for (const text of texts) expect(text.length).toBeLessThanOrEqual(4096);
    expect(numbers(texts.slice(1))).toEqual(upTo(count(answer)));
  });
});

describe('Slack', () => {
  it('gets markdown_text as written, split past 12,000 characters', async () => {
    const fake = await startFakeSlack();
    closers.push(fake.close);
    const secret = 'slack-signing-secret-for-tests';
    stack = await platformStack(redis, prefix, {
      SLACK_BOT_TOKEN: 'xoxb-test-token',
      SLACK_SIGNING_SECRET: secret,
      SLACK_API_URL: fake.apiUrl,
    });
    const payload = JSON.stringify(slackEventEnvelope({ channel: 'D0DM', channelType: 'im', text: 'hi' }));
    const res = await stack.app.inject({
      method: 'POST',
      url: '/webhooks/slack',
      headers: slackSignedHeaders(secret, payload),
      payload,
    });
    expect(res.statusCode).toBe(200);
    const answer = longAnswer(15_000);
    await stack.reply('slack-D0DM:', [CITED, answer]);
    await waitFor(async () => fake.posts().length === 3, { what: 'both replies' });
    const texts = fake.posts().map((p) => String(p.body.markdown_text));
    expect(texts[0]).toBe(CITED);
    for (const text of texts) expect(text.length).toBeLessThanOrEqual(12_000);
    expect(numbers(texts.slice(1))).toEqual(upTo(count(answer)));
  });
});
