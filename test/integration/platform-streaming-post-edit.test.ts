import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config.js';
import type { ReplyRoute } from '../../src/shared/delivery/route.js';
import type { SenderRegistry } from '../../src/shared/delivery/sender.js';
import { createSenders } from '../../src/shared/delivery/senders.js';
import { silentLogger } from '../../src/shared/logger.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { type TestDelivery, testDeliveryWorker } from '../helpers/delivery-worker.js';
import {
  DISCORD_APPLICATION_ID,
  discordKeys,
  type FakeDiscord,
  startFakeDiscord,
} from '../helpers/fake-discord.js';
import { type FakeGChat, GCHAT_ACCESS_TOKEN, startFakeGChat } from '../helpers/fake-gchat.js';
import { type FakeSlack, startFakeSlack } from '../helpers/fake-slack.js';
import { userMessage } from '../helpers/messages.js';
import { answer, deliveredAll, STREAMING } from '../helpers/platform-streaming.js';
import { deletePrefix, REDIS_ENV, randomPrefix, testRedis } from '../helpers/redis.js';
import { streamingSendModel } from '../helpers/streaming-model.js';

/**
 * PLATFORM_STREAMING=on with a real turn and the real delivery worker, through the real Slack,
 * Discord and Google Chat adapters (senders built from configuration, as a delivery process
 * builds them) against local fakes of their Web / REST APIs.
 */

const redis = testRedis();
let prefix: string;
let store: ChatStore;
let senders: SenderRegistry;
let delivery: TestDelivery;

beforeAll(() => waitReady(redis));
beforeEach(() => {
  prefix = randomPrefix('psx');
  store = new ChatStore(redis, { prefix, maxEvents: 100 });
});
afterEach(async () => {
  await delivery?.close();
  await senders?.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

// Lines (Slack's adapter streams whole lines), longer together than the Slack client's
// 256-character stream buffer, so it appends mid-stream.
const TEXT = Array.from(
  { length: 12 },
  (_, i) => `Line ${i + 1} of a reply that is long enough to stream in several pieces.`,
).join('\n');

/** Delivery for `env`'s platform, and one person's message in a chat whose replies go to `route`. */
async function start(env: Record<string, string>, chatKey: string, route: ReplyRoute): Promise<void> {
  const config = loadConfig({ ...REDIS_ENV, CHATLANE_PREFIX: prefix, LOG_LEVEL: 'silent', ...env });
  senders = await createSenders(config, silentLogger());
  delivery = testDeliveryWorker(redis, prefix, senders, { timeoutMs: 5000 }, undefined, STREAMING);
  await store.ingest(
    chatKey,
    userMessage(chatKey, 'm1', 'hello'),
    { maxPending: 10, dedupWindowMs: 60_000 },
    route,
  );
}

async function answered(chatKey: string, text = TEXT) {
  const model = streamingSendModel(() => ({ sends: [{ text, pieces: 16 }], gapMs: 100 }));
  expect((await answer(redis, prefix, delivery.queue, chatKey, model)).status).toBe('done');
  return deliveredAll(redis, prefix, delivery.queue, chatKey, () => store.readOutbox(chatKey, undefined, 10));
}

describe('PLATFORM_STREAMING=on, Slack', () => {
  let slack: FakeSlack;
  beforeEach(async () => {
    slack = await startFakeSlack();
  });
  afterEach(() => slack.close());

  it('a DM thread gets a native stream (startStream, appendStream, stopStream) holding the whole reply, and no post', async () => {
    const chatKey = 'slack-dm-thread';
    await start(
      {
        SLACK_BOT_TOKEN: 'xoxb-test-token',
        SLACK_SIGNING_SECRET: 'slack-secret',
        SLACK_API_URL: slack.apiUrl,
      },
      chatKey,
      { channel: 'slack', threadId: 'slack:D0DM:1700000000.000100' },
    );
    const [item] = await answered(chatKey);
    const streams = slack.streams();
    expect(streams).toHaveLength(1);
    const [stream] = streams;
    expect(stream).toMatchObject({ channel: 'D0DM', threadTs: '1700000000.000100', stopped: true });
    const methods = stream!.pieces.map((p) => p.method);
    expect(methods[0]).toBe('chat.startStream');
    expect(methods).toContain('chat.appendStream');
    expect(methods.at(-1)).toBe('chat.stopStream');
    // Started before the outbox item existed; ends holding exactly the committed text.
    expect(stream!.pieces[0]!.at).toBeLessThan(item!.ts);
    expect(slack.textNow(stream!.ts)).toBe(TEXT);
    expect(slack.posts()).toEqual([]);
    expect(slack.callsTo('/api/chat.update')).toEqual([]);
  });
});

describe('PLATFORM_STREAMING=on, Discord', () => {
  let discord: FakeDiscord;
  beforeEach(async () => {
    discord = await startFakeDiscord();
  });
  afterEach(() => discord.close());
  const discordEnv = () => ({
    DISCORD_BOT_TOKEN: 'discord-bot-token-for-tests',
    DISCORD_PUBLIC_KEY: discordKeys().publicKeyHex,
    DISCORD_APPLICATION_ID,
    DISCORD_API_URL: discord.apiUrl,
  });

  it('gets one post before the item is written, edited as the reply grows, ending on the committed text', async () => {
    const chatKey = 'discord-dm-1400';
    await start(discordEnv(), chatKey, { channel: 'discord', threadId: 'discord:@me:1400' });
    const [item] = await answered(chatKey);
    const posts = discord.posts();
    expect(posts).toHaveLength(1);
    expect(posts[0]!.at).toBeLessThan(item!.ts);
    expect(discord.edits().length).toBeGreaterThanOrEqual(2);
    const edited = new Set(discord.edits().map((e) => e.path.split('/').pop()!));
    expect(edited.size).toBe(1);
    const [id] = edited;
    expect(discord.contentNow(id!)).toBe(TEXT);
  });

  it('a reply longer than a message: the streamed post ends as its first message and the others follow it, nothing cut', async () => {
    const chatKey = 'discord-dm-1401';
    await start(discordEnv(), chatKey, { channel: 'discord', threadId: 'discord:@me:1401' });
    const long = Array.from({ length: 110 }, (_, i) => `Sentence ${i} of a long streamed reply.`).join(' ');
    expect(long.length).toBeGreaterThan(4000);
    await answered(chatKey, long);
    // The stream showed what the adapter makes of the text (cut to 2,000 with "..."); delivery
    // edited the post to the first message and posted the others after it.
    const [post, ...rest] = discord.posts();
    expect(post).toBeDefined();
    const streamed = new Set(discord.edits().map((e) => e.path.split('/').pop()!));
    expect(streamed.size).toBe(1);
    const [id] = streamed;
    const messages = [discord.contentNow(id!)!, ...rest.map((p) => String(p.body.content))];
    expect(messages.length).toBeGreaterThanOrEqual(3);
    for (const m of messages) expect(m.length).toBeLessThanOrEqual(2000);
    expect(messages.join(' ')).toBe(long);
  });
});

describe('PLATFORM_STREAMING=on, Google Chat', () => {
  let gchat: FakeGChat;
  const saved: Record<string, string | undefined> = {};
  beforeEach(async () => {
    gchat = await startFakeGChat();
    // Read by Google's auth library itself (Application Default Credentials), as in production.
    // With no project named, its first call looks one up (gcloud, the metadata server): seconds.
    for (const [name, value] of Object.entries(gchat.adcEnv)) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
  });
  afterEach(async () => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    await gchat.close();
  });

  it('gets one post in the thread before the item is written, edited as the reply grows, ending on the committed text', async () => {
    const threadName = 'spaces/AAAAstream/threads/T1';
    const threadId = `gchat:spaces/AAAAstream:${Buffer.from(threadName).toString('base64url')}`;
    const chatKey = 'gchat-stream-thread';
    await start(
      {
        GOOGLE_CHAT_USE_ADC: 'true',
        GOOGLE_CHAT_PROJECT_NUMBER: '123456789012',
        GOOGLE_CHAT_API_URL: gchat.apiUrl,
      },
      chatKey,
      { channel: 'gchat', threadId },
    );
    const [item] = await answered(chatKey);
    const posts = gchat.posts();
    expect(posts).toHaveLength(1);
    expect(posts[0]!.at).toBeLessThan(item!.ts);
    expect(posts[0]!.body.thread).toEqual({ name: threadName });
    expect(posts[0]!.query.get('messageReplyOption')).toBe('REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD');
    // Every call carried the token the library got from the exchange, not a fixed one of ours.
    expect(gchat.tokenExchanges().length).toBeGreaterThanOrEqual(1);
    expect(posts[0]!.headers.authorization).toBe(`Bearer ${GCHAT_ACCESS_TOKEN}`);
    expect(gchat.edits().length).toBeGreaterThanOrEqual(2);
    const edited = new Set(gchat.edits().map((e) => e.path.slice('/v1/'.length)));
    expect(edited.size).toBe(1);
    const [name] = edited;
    expect(gchat.textNow(name!)).toBe(TEXT);
  });
});
