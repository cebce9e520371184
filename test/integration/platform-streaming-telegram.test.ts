import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { FakeTelegram } from '../../src/fake-telegram/server.js';
import type { SenderRegistry } from '../../src/shared/delivery/sender.js';
import { createSenders } from '../../src/shared/delivery/senders.js';
import { enqueueDelivery } from '../../src/shared/jobs.js';
import { lazyChatKeys } from '../../src/shared/keys.js';
import { silentLogger } from '../../src/shared/logger.js';
import { waitReady } from '../../src/shared/redis.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { SEND_PART_METADATA } from '../../src/shared/store/reply-send-part.js';
import { ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { replyAsTurn, type TestDelivery, testDeliveryWorker } from '../helpers/delivery-worker.js';
import type { TestIngress } from '../helpers/ingress.js';
import { answer, deliveredAll, STREAMING, settled } from '../helpers/platform-streaming.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { streamingSendModel } from '../helpers/streaming-model.js';
import { chatFromTelegram, startTelegramSide, type TelegramSide } from '../helpers/telegram.js';

/**
 * PLATFORM_STREAMING=on end to end in one process: a real turn (its model writes chat_send
 * input over time) streams its reply into Redis, the real delivery worker follows it into
 * the real Telegram adapter's streaming post against the fake Bot API 10.1, and the
 * committed outbox item then moves the delivery cursor without a second post.
 */

const redis = testRedis();
let prefix: string;
let tg: TelegramSide;
let fake: FakeTelegram;
let ing: TestIngress;
let store: ChatStore;
let senders: SenderRegistry;
let delivery: TestDelivery;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('pstg');
  tg = await startTelegramSide(redis, prefix);
  ({ fake, ing, store } = tg);
  senders = await createSenders(tg.config, silentLogger());
  delivery = testDeliveryWorker(redis, prefix, senders, { timeoutMs: 5000 }, undefined, STREAMING);
});
afterEach(async () => {
  await delivery.close();
  await senders.close();
  await tg.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const TEXT = 'Streamed replies show up in the chat while the model is still writing them.';
const THINKING = 'Let me think about what to say first. ';
const outbox = (chatKey: string) => () => store.readOutbox(chatKey, undefined, 20);
const turn = (chatKey: string, model: ReturnType<typeof streamingSendModel>, opts = {}) =>
  answer(redis, prefix, delivery.queue, chatKey, model, opts);
const done = (chatKey: string) => deliveredAll(redis, prefix, delivery.queue, chatKey, outbox(chatKey));
/** Telegram's flood wait on the next call of `method`: retry after 1 s. */
const tooMany = (method: string) => ({
  code: 429,
  description: 'Too Many Requests: retry after 1',
  retryAfter: 1,
  methods: [method],
});
const posts = (chatKey: string) => new DeliveryStore(redis, prefix, 100).posts(chatKey);

describe('PLATFORM_STREAMING=on, Telegram', () => {
  it('a private chat gets growing drafts of the chat_send while the turn writes, then one message; the committed item moves the cursor without a second post', async () => {
    const chatKey = await chatFromTelegram(ing, 4301);
    const model = streamingSendModel(() => ({
      thinking: THINKING,
      sends: [{ text: TEXT, pieces: 8 }],
      gapMs: 100,
    }));
    expect((await turn(chatKey, model)).status).toBe('done');
    const [item] = await done(chatKey);
    const drafts = fake.draftsTo(4301);
    expect(drafts.length).toBeGreaterThanOrEqual(2);
    expect(drafts.every((d, i) => i === 0 || d.text.startsWith(drafts[i - 1]!.text))).toBe(true);
    expect(drafts.at(-1)!.text).toBe(TEXT);
    // Shown before the outbox item existed, and never the plain assistant text.
    expect(drafts[0]!.at).toBeLessThan(item!.ts);
    expect(drafts.some((d) => d.text.includes('think'))).toBe(false);
    expect(fake.sentTo(4301).map((s) => [s.method, s.text])).toEqual([['sendRichMessage', TEXT]]);
    expect((await posts(chatKey)).post).toBeUndefined();
  });

  it('a group gets a post before the item is written, edited as it grows, ending on the committed text', async () => {
    const chatKey = await chatFromTelegram(ing, -1004302);
    const model = streamingSendModel(() => ({ sends: [{ text: TEXT, pieces: 8 }], gapMs: 150 }));
    expect((await turn(chatKey, model)).status).toBe('done');
    const [item] = await done(chatKey);
    const sent = fake.sentTo(-1004302);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.at).toBeLessThan(item!.ts);
    expect(fake.editsTo(-1004302).length).toBeGreaterThanOrEqual(1);
    expect(fake.textNow(sent[0]!.messageId)).toBe(TEXT);
    expect(fake.draftsTo(-1004302)).toEqual([]);
  });

  it('a stream cut short (the writer stalled) is edited to the committed text when the item comes', async () => {
    const chatKey = await chatFromTelegram(ing, 4303);
    const model = streamingSendModel(() => ({
      sends: [{ text: TEXT, pieces: 8, pauseAfter: 3, pauseMs: 2500 }],
      gapMs: 60,
    }));
    expect((await turn(chatKey, model)).status).toBe('done');
    await done(chatKey);
    const sent = fake.sentTo(4303);
    expect(sent).toHaveLength(1);
    // What the stream showed when it was cut: a part of the text, not all of it.
    expect(TEXT.startsWith(sent[0]!.text)).toBe(true);
    expect(sent[0]!.text.length).toBeLessThan(TEXT.length);
    expect(fake.editsTo(4303).map((e) => e.text)).toEqual([TEXT]);
    expect(fake.textNow(sent[0]!.messageId)).toBe(TEXT);
  });

  it("a 429 on the edit that completes a cut post waits Telegram's retry_after, then edits", async () => {
    const chatKey = await chatFromTelegram(ing, 4304);
    fake.failNext(4304, tooMany('editMessageText'));
    const model = streamingSendModel(() => ({
      sends: [{ text: TEXT, pieces: 8, pauseAfter: 3, pauseMs: 2500 }],
      gapMs: 60,
    }));
    expect((await turn(chatKey, model)).status).toBe('done');
    await done(chatKey);
    const refused = fake.refused.find((r) => r.chatId === '4304')!;
    expect(refused.method).toBe('editMessageText');
    const [edit] = fake.editsTo(4304);
    // The backoff alone would retry after 50 ms; retry_after says 1 s.
    expect(edit!.at - refused.at).toBeGreaterThanOrEqual(950);
    expect(fake.sentTo(4304)).toHaveLength(1);
    expect(fake.textNow(fake.sentTo(4304)[0]!.messageId)).toBe(TEXT);
  });

  it("a 429 ending the streamed post is a retry after Telegram's retry_after; the item then goes out whole", async () => {
    const chatKey = await chatFromTelegram(ing, 4307);
    // The message the drafts end in is refused.
    fake.failNext(4307, tooMany('sendRichMessage'));
    const model = streamingSendModel(() => ({ sends: [{ text: TEXT, pieces: 6 }], gapMs: 100 }));
    expect((await turn(chatKey, model)).status).toBe('done');
    await done(chatKey);
    const refused = fake.refused.find((r) => r.chatId === '4307')!;
    expect(refused.method).toBe('sendRichMessage');
    expect(fake.draftsTo(4307).length).toBeGreaterThanOrEqual(1);
    const sent = fake.sentTo(4307);
    expect(sent.map((s) => s.text)).toEqual([TEXT]);
    expect(sent[0]!.at - refused.at).toBeGreaterThanOrEqual(950);
  });

  it('a streamed send that never becomes an outbox item (a duplicate) has its post deleted when the turn ends', async () => {
    const chatKey = await chatFromTelegram(ing, 4305);
    // The second step says the same again: chat_send refuses it as a duplicate, no item.
    const model = streamingSendModel(() => ({
      sends: [{ text: TEXT, pieces: 4 }],
      gapMs: 100,
      next: { sends: [{ text: TEXT, pieces: 12 }], gapMs: 150 },
    }));
    expect((await turn(chatKey, model)).status).toBe('done');
    const items = await done(chatKey);
    expect(items.map((i) => i.text)).toEqual([TEXT]);
    await waitFor(async () => fake.deleted.length === 1, { what: 'the stray post deleted' });
    await settled(delivery.queue);
    const [kept, stray] = fake.sentTo(4305);
    expect(fake.sentTo(4305)).toHaveLength(2);
    expect(fake.textNow(kept!.messageId)).toBe(TEXT);
    expect(fake.deleted.map((d) => d.messageId)).toEqual([stray!.messageId]);
    expect(fake.textNow(stray!.messageId)).toBeUndefined();
    expect((await posts(chatKey)).post).toBeUndefined();
  });

  it('a committed item waiting on a 429 goes out before the next reply streams: per-chat order holds', async () => {
    const chatKey = await chatFromTelegram(ing, 4306);
    fake.failNext(4306, tooMany('sendRichMessage'));
    await replyAsTurn(store, delivery.queue, chatKey, ['an earlier reply']);
    await waitFor(async () => fake.refused.length === 1, { what: 'the earlier reply refused' });
    const model = streamingSendModel(() => ({ sends: [{ text: TEXT, pieces: 10 }], gapMs: 150 }));
    expect((await turn(chatKey, model)).status).toBe('done');
    await done(chatKey);
    const [earlier, streamed] = fake.sentTo(4306);
    expect([earlier?.text, streamed?.text]).toEqual(['an earlier reply', TEXT]);
    expect(fake.sentTo(4306)).toHaveLength(2);
    // The stream was still being written after the earlier reply went out, and was shown.
    const drafts = fake.draftsTo(4306);
    expect(drafts.length).toBeGreaterThanOrEqual(1);
    expect(drafts.every((d) => d.at >= earlier!.at)).toBe(true);
  });
  it('an item that reaches the outbox before its part’s end reaches the reply stream is delivered once: the part is not streamed into a second post', async () => {
    const chatKey = await chatFromTelegram(ing, -1004311);
    const replies = new ReplyStreams(redis, { prefix, maxEvents: 100, maxLen: 100, ttlMs: 60_000 });
    const lease = await store.acquire(chatKey, 'w:run-1', 60_000);
    if (!lease.ok) throw new Error('busy');
    const chunk = (c: object): ['c', string] => ['c', JSON.stringify(c)];
    // The turn is live and its chat_send part is open in the reply stream…
    await replies.write(chatKey, lease.fence, 'run-1', 'open', [
      chunk({ type: 'start' }),
      chunk({ type: 'text-start', id: 'call-1', providerMetadata: SEND_PART_METADATA }),
      chunk({ type: 'text-delta', id: 'call-1', delta: TEXT }),
    ]);
    // …when the tool's outbox write, which does not wait for the reply stream, comes first.
    const written = await store.sendOutbox(chatKey, lease.fence, {
      runId: 'run-1',
      text: TEXT,
      ts: Date.now(),
      part: 'call-1',
    });
    if (!written.ok) throw new Error('fenced out');
    await enqueueDelivery(delivery.queue, chatKey);
    // Delivered, and then recognised in the live reply: delivery reads on past the part.
    const startId = (await replies.read(chatKey, 'run-1'))[1]!.id;
    await waitFor(async () => (await posts(chatKey)).after === startId, { what: 'the part passed over' });
    expect(fake.sentTo(-1004311).map((m) => m.text)).toEqual([TEXT]);

    // The part's end, the reply's end and the lease: nothing more is posted, nothing deleted.
    await replies.write(chatKey, lease.fence, 'run-1', 'close', [
      chunk({ type: 'text-end', id: 'call-1' }),
      chunk({ type: 'finish' }),
    ]);
    await store.finish(chatKey, lease.fence, 'w:run-1', 'run-1');
    await enqueueDelivery(delivery.queue, chatKey);
    await settled(delivery.queue);
    expect(fake.sentTo(-1004311).map((m) => m.text)).toEqual([TEXT]);
    expect(fake.deleted).toEqual([]);
  });
});

describe('PLATFORM_STREAMING=off', () => {
  it('posts each reply whole once its item is committed: no drafts, no posts hash', async () => {
    await delivery.close();
    delivery = testDeliveryWorker(redis, prefix, senders, { timeoutMs: 5000 });
    const chatKey = await chatFromTelegram(ing, 4310);
    const model = streamingSendModel(() => ({ sends: [{ text: TEXT, pieces: 8 }], gapMs: 60 }));
    expect((await turn(chatKey, model, { platformStreaming: false })).status).toBe('done');
    const [item] = await done(chatKey);
    expect(fake.draftsTo(4310)).toEqual([]);
    expect(fake.sentTo(4310).map((s) => [s.method, s.text])).toEqual([['sendRichMessage', TEXT]]);
    expect(fake.sentTo(4310)[0]!.at).toBeGreaterThanOrEqual(item!.ts);
    expect(await redis.exists(lazyChatKeys(prefix, chatKey).posts)).toBe(0);
  });
});
