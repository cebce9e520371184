import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FakeTelegram } from '../../src/fake-telegram/server.js';
import { loadConfig } from '../../src/shared/config.js';
import { ChatSdkSender } from '../../src/shared/delivery/chat-sdk-sender.js';
import { followReplyText } from '../../src/shared/delivery/reply-text.js';
import { silentLogger } from '../../src/shared/logger.js';
import { discord as discordModule } from '../../src/shared/platforms/discord.js';
import { type PlatformRuntime, startPlatformRuntime } from '../../src/shared/platforms/runtime.js';
import { telegram } from '../../src/shared/platforms/telegram.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { ReplyStreams } from '../../src/shared/store/reply-streams.js';
import {
  DISCORD_APPLICATION_ID,
  discordKeys,
  type FakeDiscord,
  startFakeDiscord,
} from '../helpers/fake-discord.js';
import { deletePrefix, REDIS_ENV, randomPrefix, testRedis } from '../helpers/redis.js';
import { telegramRuntime } from '../helpers/telegram.js';

/**
 * A reply stream (UI message chunks in Redis, as the worker writes them) followed live and
 * posted through the real Telegram adapter's streaming post to the fake Bot API 10.1.
 */

const redis = testRedis();
let prefix: string;
let store: ChatStore;
let replies: ReplyStreams;
let fake: FakeTelegram;
let runtime: PlatformRuntime;
let sender: ChatSdkSender;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('pstream');
  store = new ChatStore(redis, { prefix, maxEvents: 100 });
  replies = new ReplyStreams(redis, { prefix, maxEvents: 100, maxLen: 500, ttlMs: 60_000 });
  fake = await new FakeTelegram().start();
  ({ runtime } = await telegramRuntime(redis, prefix, fake));
  sender = new ChatSdkSender('telegram', async () => runtime, true, telegram.replies);
});
afterEach(async () => {
  await runtime.close();
  await fake.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const chunk = (c: object): ['c', string] => ['c', JSON.stringify(c)];
const PARTS = ['Streaming ', 'replies ', 'show ', 'up ', 'as ', 'they ', 'are ', 'written.'];
const FULL = PARTS.join('');

async function fence(chatKey: string, owner: string, ttlMs = 60_000): Promise<string> {
  const res = await store.acquire(chatKey, owner, ttlMs);
  if (!res.ok) throw new Error('busy');
  return res.fence;
}

/** A turn writing a chat_send's text part chunk by chunk, `gapMs` apart; `cutAfter` stops it there. */
async function writeReply(chatKey: string, f: string, runId: string, gapMs: number, cutAfter?: number) {
  await replies.write(chatKey, f, runId, 'open', [chunk({ type: 'start' }), chunk({ type: 'start-step' })]);
  await replies.write(chatKey, f, runId, 'append', [chunk({ type: 'text-start', id: 'call_1' })]);
  for (const [i, delta] of PARTS.entries()) {
    if (i === cutAfter) return;
    await new Promise((r) => setTimeout(r, gapMs));
    await replies.write(chatKey, f, runId, 'append', [chunk({ type: 'text-delta', id: 'call_1', delta })]);
  }
  await replies.write(chatKey, f, runId, 'append', [chunk({ type: 'text-end', id: 'call_1' })]);
  await replies.write(chatKey, f, runId, 'close', [
    chunk({ type: 'finish-step' }),
    chunk({ type: 'finish' }),
  ]);
}

const signal = () => AbortSignal.timeout(20_000);

/** The turn writes its reply `gapMs` a chunk while the sender follows and posts it to `threadId`. */
async function streamWhileWriting(chatKey: string, threadId: string, gapMs: number, via = sender) {
  const f = await fence(chatKey, 'w1:run-a');
  const writing = writeReply(chatKey, f, 'run-a', gapMs);
  const follow = followReplyText(replies, chatKey, 'run-a', { pollMs: 20, idleMs: 5000 });
  const result = await via.streamPost(threadId, follow.texts, signal());
  const postedAt = Date.now();
  await writing;
  return { result, follow, postedAt };
}

describe('a reply stream posted to Telegram as it is written', () => {
  it('shows a private chat growing drafts while the turn writes, then one message with the whole text', async () => {
    const { result, follow } = await streamWhileWriting('telegram-chat-4301', 'telegram:4301', 120);
    expect(result.status).toBe('ok');
    expect(follow.end()).toBe('complete');
    const drafts = fake.draftsTo(4301);
    expect(drafts.length).toBeGreaterThanOrEqual(3);
    expect(drafts.every((d, i) => i === 0 || d.text.startsWith(drafts[i - 1]!.text))).toBe(true);
    expect(drafts.at(-1)!.text).toBe(FULL);
    // The first draft was shown while the turn was still writing.
    const [final] = fake.sentTo(4301);
    expect(drafts[0]!.at).toBeLessThan(final!.at - 300);
    expect(fake.sentTo(4301).map((s) => [s.method, s.text])).toEqual([['sendRichMessage', FULL]]);
    expect(result.messageId).toContain(String(final!.messageId));
  });

  it('posts to a group before the turn ends and edits the post to the whole text', async () => {
    const { result, postedAt: wroteAt } = await streamWhileWriting(
      'telegram-chat--1004302',
      'telegram:-1004302',
      60,
    );
    expect(result.status).toBe('ok');
    const [post] = fake.sentTo(-1004302);
    expect(fake.sentTo(-1004302)).toHaveLength(1);
    expect(post!.at).toBeLessThan(wroteAt - 300);
    expect(fake.textNow(post!.messageId)).toBe(FULL);
    expect(fake.draftsTo(-1004302)).toEqual([]);
  });

  it("after a 429 on an edit mid-stream, waits Telegram's retry_after and still ends on the whole text", async () => {
    fake.failNext(-1004303, {
      code: 429,
      description: 'Too Many Requests: retry after 1',
      retryAfter: 1,
      methods: ['editMessageText'],
    });
    const { result } = await streamWhileWriting('telegram-chat--1004303', 'telegram:-1004303', 30);
    expect(result.status).toBe('ok');
    const [refused] = fake.refused;
    const [post] = fake.sentTo(-1004303);
    expect(refused?.method).toBe('editMessageText');
    const after = fake.editsTo(-1004303).filter((e) => e.at > refused!.at);
    expect(after.at(-1)!.at - refused!.at).toBeGreaterThanOrEqual(950);
    expect(fake.textNow(post!.messageId)).toBe(FULL);
  });

  it('a reply cut by a takeover ends the post as cut; an edit then gives it the committed text', async () => {
    const chatKey = 'telegram-chat-4304';
    const f = await fence(chatKey, 'w1:run-a', 1);
    await writeReply(chatKey, f, 'run-a', 10, 3);
    const follow = followReplyText(replies, chatKey, 'run-a', { pollMs: 20, idleMs: 5000 });
    const posting = sender.streamPost('telegram:4304', follow.texts, signal());
    // The worker died; the takeover opens its own reply, which closes the half one with abort.
    await new Promise((r) => setTimeout(r, 100));
    const f2 = await fence(chatKey, 'w2:run-b');
    await replies.write(chatKey, f2, 'run-b', 'open', [chunk({ type: 'start' })]);
    const result = await posting;
    expect(follow.end()).toBe('cut');
    expect(follow.text()).toBe(PARTS.slice(0, 3).join(''));
    expect(result.status).toBe('ok');
    const committed = 'The takeover’s whole reply.';
    const edited = await sender.editPost(
      'telegram:4304',
      result.messageId!,
      { text: committed, message: { markdown: committed } },
      signal(),
    );
    expect(edited.status).toBe('ok');
    const [post] = fake.sentTo(4304);
    expect(fake.sentTo(4304)).toHaveLength(1);
    expect(fake.textNow(post!.messageId)).toBe(committed);
  });

  it('a writer gone silent with no takeover ends the follow as cut after idleMs', async () => {
    const chatKey = 'telegram-chat-4305';
    const f = await fence(chatKey, 'w1:run-a');
    await writeReply(chatKey, f, 'run-a', 5, 2);
    const follow = followReplyText(replies, chatKey, 'run-a', { pollMs: 20, idleMs: 300 });
    const texts: string[] = [];
    for await (const t of follow.texts) texts.push(t);
    expect(texts).toEqual(PARTS.slice(0, 2));
    expect(follow.end()).toBe('cut');
  });
});

describe('a reply stream posted to Discord as it is written', () => {
  let discord: FakeDiscord;
  let discordRuntime: PlatformRuntime;
  let discordSender: ChatSdkSender;
  beforeEach(async () => {
    discord = await startFakeDiscord();
    const config = loadConfig({
      ...REDIS_ENV,
      CHATLANE_PREFIX: prefix,
      DISCORD_BOT_TOKEN: 'discord-bot-token-for-tests',
      DISCORD_PUBLIC_KEY: discordKeys().publicKeyHex,
      DISCORD_APPLICATION_ID,
      DISCORD_API_URL: discord.apiUrl,
    });
    discordRuntime = await startPlatformRuntime(config, redis, silentLogger());
    discordSender = new ChatSdkSender('discord', async () => discordRuntime, true, discordModule.replies);
  });
  afterEach(async () => {
    await discordRuntime.close();
    await discord.close();
  });

  it('posts before the turn ends, edits the post as the text grows (a 429 on one edit skipped), and ends on the whole text', async () => {
    discord.scriptNext(/\/messages\/\d+$/, {
      status: 429,
      headers: { 'retry-after': '0.2' },
      body: { message: 'You are being rate limited.', retry_after: 0.2, global: false },
    });
    const { result, postedAt } = await streamWhileWriting(
      'discord-@me:1400',
      'discord:@me:1400',
      150,
      discordSender,
    );
    expect(result.status).toBe('ok');
    const posts = discord.posts();
    expect(posts).toHaveLength(1);
    expect(posts[0]!.at).toBeLessThan(postedAt - 500);
    const edits = discord.edits().map((e) => String(e.body.content));
    // One refused, at least one more mid-stream, and the final one.
    expect(edits.length).toBeGreaterThanOrEqual(3);
    const accepted = edits.slice(1);
    expect(accepted.every((t, i) => i === 0 || t.startsWith(accepted[i - 1]!))).toBe(true);
    expect(discord.contentNow(result.messageId!)).toBe(FULL);
  });
});
