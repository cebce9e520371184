import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BOT, FakeTelegram, messageUpdate } from '../../src/fake-telegram/server.js';
import { HttpError } from '../../src/ingress/errors.js';
import { createIngest, type Ingest } from '../../src/ingress/ingest.js';
import { loadConfig } from '../../src/shared/config.js';
import { createQueue, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { createMetrics, type Metrics } from '../../src/shared/metrics.js';
import type { PlatformRuntime } from '../../src/shared/platforms/runtime.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { deletePrefix, keysUnder, REDIS_ENV, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { TELEGRAM_SECRET, telegramHeaders, telegramRuntime } from '../helpers/telegram.js';

const SECRET = TELEGRAM_SECRET;
const redis = testRedis();
let prefix: string;
let fake: FakeTelegram;
let runtime: PlatformRuntime;
let ing: TestIngress;
let metrics: Metrics;
/** Fails the next N ingests with 503 (a Redis outage as the ingest reports it). */
let failIngests = 0;

async function start(groupMode: 'all' | 'mentions' = 'mentions') {
  runtime = (await telegramRuntime(redis, prefix, fake)).runtime;
  const store = new ChatStore(redis, { prefix, maxEvents: 100 });
  const turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
  const real = createIngest({ store, turns, limits: { maxPendingPerChat: 1000, dedupWindowMs: 60_000 } });
  const ingest: Ingest = async (req) => {
    if (failIngests > 0) {
      failIngests -= 1;
      throw new HttpError('REDIS_UNAVAILABLE', 'redis is unavailable');
    }
    return real(req);
  };
  await turns.close();
  metrics = createMetrics({ defaultMetrics: false });
  ing = await testIngress(redis, prefix, { platforms: { runtime, groupMode }, ingest, metrics });
  await waitFor(async () => (await redis.exists(`${prefix}:{q:turns}:turns:meta`)) === 1, {
    what: 'queue meta',
  });
}

/** `secret: null` sends no secret header. */
function post(update: unknown, secret: string | null = SECRET, platform = 'telegram') {
  return ing.app.inject({
    method: 'POST',
    url: `/webhooks/${platform}`,
    headers: telegramHeaders(secret),
    payload: typeof update === 'string' ? update : JSON.stringify(update),
  });
}

const keys = () => keysUnder(redis, prefix);

async function unsupportedCount(): Promise<number> {
  const m = await metrics.platformUpdates.get();
  return m.values.find((v) => v.labels.outcome === 'unsupported')?.value ?? 0;
}

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('tgw');
  failIngests = 0;
  fake = await new FakeTelegram().start();
  await start();
});
afterEach(async () => {
  await ing.close();
  await runtime.close();
  await fake.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('POST /webhooks/telegram', () => {
  it('stores a private message under telegram-chat-<chatId> with its metadata and reply route, and enqueues the turn', async () => {
    const update = messageUpdate({ chatId: 42, text: 'hello bot' });
    const res = await post(update);
    expect(res.statusCode).toBe(200);
    const [message] = await ing.store.readAllPending('telegram-chat-42');
    expect(message!.parts).toEqual([{ type: 'text', text: 'hello bot' }]);
    expect(message!.id).toBe(`telegram:42:${update.message.message_id}`);
    expect(message!.metadata).toMatchObject({
      channel: 'telegram',
      chatId: '42',
      threadId: 'telegram:42',
      userId: '42',
      username: 'alice',
      messageId: String(update.message.message_id),
      extra: { platform: 'telegram', chatType: 'private' },
    });
    expect(await redis.hget(`${prefix}:{c:telegram-chat-42}:meta`, 'route')).toBe(
      JSON.stringify({ channel: 'telegram', threadId: 'telegram:42' }),
    );
    expect((await ing.turns.getJobs(['waiting'])).map((j) => j.data)).toEqual([
      { chatKey: 'telegram-chat-42' },
    ]);
  });

  it('in a group stores only messages that mention the bot (GROUP_MODE=mentions)', async () => {
    const before = await keys();
    const plain = await post(messageUpdate({ chatId: -100200, text: 'just chatting' }));
    expect(plain.statusCode).toBe(200);
    expect(await keys()).toEqual(before);
    const text = `@${BOT.username} what time is it?`;
    const mention = await post(
      messageUpdate({
        chatId: -100200,
        text,
        entities: [{ type: 'mention', offset: 0, length: BOT.username.length + 1 }],
      }),
    );
    expect(mention.statusCode).toBe(200);
    const pending = await ing.store.readAllPending('telegram-chat--100200');
    expect(pending.map((m) => m.parts)).toEqual([[{ type: 'text', text }]]);
    expect(pending[0]!.metadata.extra).toMatchObject({ chatType: 'supergroup' });
  });

  it('in a group stores every message with GROUP_MODE=all', async () => {
    await ing.close();
    await runtime.close();
    await start('all');
    expect((await post(messageUpdate({ chatId: -100201, text: 'just chatting' }))).statusCode).toBe(200);
    expect(await ing.store.readAllPending('telegram-chat--100201')).toHaveLength(1);
  });

  it('keys a forum topic as telegram-chat-<chatId>-topic-<threadId> and routes replies to the topic', async () => {
    const res = await post(
      messageUpdate({
        chatId: -100300,
        topicId: 7,
        text: `@${BOT.username} in a topic`,
        entities: [{ type: 'mention', offset: 0, length: BOT.username.length + 1 }],
      }),
    );
    expect(res.statusCode).toBe(200);
    const [message] = await ing.store.readAllPending('telegram-chat--100300-topic-7');
    expect(message!.metadata).toMatchObject({ chatId: '-100300', threadId: 'telegram:-100300:7' });
    expect(message!.metadata.extra).toMatchObject({ topicId: '7' });
    expect(await redis.hget(`${prefix}:{c:telegram-chat--100300-topic-7}:meta`, 'route')).toBe(
      JSON.stringify({ channel: 'telegram', threadId: 'telegram:-100300:7' }),
    );
  });

  it('stores a caption-only photo as its caption plus a file_id note, never the bytes', async () => {
    const res = await post(messageUpdate({ chatId: 43, caption: 'look at this', photo: true }));
    expect(res.statusCode).toBe(200);
    const [message] = await ing.store.readAllPending('telegram-chat-43');
    expect(message!.parts).toEqual([{ type: 'text', text: 'look at this\n[photo: file_id AgACAgBIG]' }]);
    expect(message!.metadata.extra).toMatchObject({
      files: [{ type: 'image', fileId: 'AgACAgBIG', fileUniqueId: 'uniqBig', mediaType: 'image/jpeg' }],
    });
  });

  it('answers 200 to an unsupported update (a reaction), counts it and stores nothing', async () => {
    const before = await keys();
    const res = await post({
      update_id: 900_001,
      message_reaction: {
        chat: { id: 42, type: 'private' },
        message_id: 5,
        user: { id: 42, is_bot: false, first_name: 'Alice' },
        date: Math.floor(Date.now() / 1000),
        old_reaction: [],
        new_reaction: [{ type: 'emoji', emoji: '👍' }],
      },
    });
    expect(res.statusCode).toBe(200);
    expect(await keys()).toEqual(before);
    expect(await unsupportedCount()).toBe(1);
  });

  it('answers 200 to an edit and stores nothing (an edit is not a new message)', async () => {
    const update = messageUpdate({ chatId: 44, text: 'typo' });
    const before = await keys();
    const edited = { update_id: update.update_id, edited_message: { ...update.message, edit_date: 1 } };
    expect((await post(edited)).statusCode).toBe(200);
    expect(await keys()).toEqual(before);
    expect(await unsupportedCount()).toBe(1);
  });

  it('refuses a wrong or missing secret token with 401 INVALID_SIGNATURE and writes nothing', async () => {
    const before = await keys();
    for (const secret of ['wrong-secret', null]) {
      const res = await post(messageUpdate({ chatId: 42, text: 'hello' }), secret);
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('INVALID_SIGNATURE');
    }
    expect(await keys()).toEqual(before);
  });

  it('refuses malformed JSON with 400 and writes nothing', async () => {
    const before = await keys();
    const res = await post('{"update_id": 1, "message": ');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('INVALID_JSON');
    expect(await keys()).toEqual(before);
  });

  it('answers 404 PLATFORM_NOT_ENABLED for a platform that is not configured', async () => {
    const res = await post({ type: 'event_callback' }, null, 'slack');
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('PLATFORM_NOT_ENABLED');
  });

  it('answers 200 to a redelivered update_id and writes nothing new', async () => {
    const update = messageUpdate({ chatId: 45, text: 'once' });
    expect((await post(update)).statusCode).toBe(200);
    const after = await keys();
    const pending = await ing.store.readAllPending('telegram-chat-45');
    expect((await post(update)).statusCode).toBe(200);
    expect(await keys()).toEqual(after);
    expect(await ing.store.readAllPending('telegram-chat-45')).toEqual(pending);
  });

  it('answers 5xx when the ingest fails, so Telegram retries, and stores the retried update', async () => {
    failIngests = 1;
    const update = messageUpdate({ chatId: 46, text: 'retry me' });
    const failed = await post(update);
    expect(failed.statusCode).toBe(503);
    expect(failed.json().error.code).toBe('REDIS_UNAVAILABLE');
    expect(await ing.store.readAllPending('telegram-chat-46')).toEqual([]);
    // Telegram redelivers the same update: the SDK's dedup claim of the failed attempt is gone.
    expect((await post(update)).statusCode).toBe(200);
    await waitFor(async () => (await ing.store.readAllPending('telegram-chat-46')).length === 1, {
      what: 'the retried update',
    });
  });
});

describe('Telegram configuration', () => {
  it('stops on a half configuration, naming the missing variable', () => {
    expect(() => loadConfig({ ...REDIS_ENV, TELEGRAM_BOT_TOKEN: BOT.token })).toThrow(
      /TELEGRAM_WEBHOOK_SECRET_TOKEN: missing/,
    );
    expect(() => loadConfig({ ...REDIS_ENV, TELEGRAM_WEBHOOK_SECRET_TOKEN: SECRET })).toThrow(
      /TELEGRAM_BOT_TOKEN: missing/,
    );
  });

  it('needs no webhook secret in polling mode, and then takes no webhooks', async () => {
    const config = loadConfig({ ...REDIS_ENV, TELEGRAM_BOT_TOKEN: BOT.token, TELEGRAM_MODE: 'polling' });
    expect(config.PLATFORMS.map((p) => p.module.name)).toEqual(['telegram']);
  });

  it('is off without TELEGRAM_* variables', () => {
    expect(loadConfig({ ...REDIS_ENV }).PLATFORMS).toEqual([]);
  });
});
