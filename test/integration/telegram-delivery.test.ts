import type { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { FakeTelegram } from '../../src/fake-telegram/server.js';
import { classifySendError } from '../../src/shared/delivery/chat-sdk-sender.js';
import { SenderRegistry } from '../../src/shared/delivery/sender.js';
import { createSenders } from '../../src/shared/delivery/senders.js';
import { TypingIndicator } from '../../src/shared/delivery/typing.js';
import { type DeliveryJob, enqueueDelivery } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import { createMetrics, type Metrics } from '../../src/shared/metrics.js';
import { waitReady } from '../../src/shared/redis.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { replyAsTurn, type TestDelivery, testDeliveryWorker } from '../helpers/delivery-worker.js';
import type { TestIngress } from '../helpers/ingress.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';
import { chatFromTelegram, startTelegramSide, type TelegramSide } from '../helpers/telegram.js';
import { turnDeps } from '../helpers/turn-deps.js';

const redis = testRedis();
let prefix: string;
let tg: TelegramSide;
let fake: FakeTelegram;
let ing: TestIngress;
let store: ChatStore;
let queue: Queue<DeliveryJob>;
let delivery: TestDelivery;
let senders: SenderRegistry;
let metrics: Metrics;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('tgd');
  tg = await startTelegramSide(redis, prefix);
  ({ fake, ing, store } = tg);
  const config = tg.config;
  // The senders a delivery process builds from the same configuration (its own runtime).
  senders = await createSenders(config, silentLogger());
  metrics = createMetrics({ defaultMetrics: false });
  delivery = testDeliveryWorker(redis, prefix, senders, { maxAttempts: 3, timeoutMs: 5000 }, metrics);
  queue = delivery.queue;
});
afterEach(async () => {
  await delivery.close();
  await senders.close();
  await tg.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const reply = (chatKey: string, texts: string[]) => replyAsTurn(store, queue, chatKey, texts);

describe('replies to Telegram chats', () => {
  it('arrive at sendRichMessage (Bot API 10.1) with the chat_id and the Markdown as written, in order', async () => {
    const chatKey = await chatFromTelegram(ing, 42);
    await reply(chatKey, ['first', 'second *bold*', 'third']);
    await waitFor(async () => fake.sentTo(42).length === 3, { what: 'three replies' });
    expect(fake.sentTo(42).map((s) => [s.method, s.text, s.threadId])).toEqual([
      ['sendRichMessage', 'first', undefined],
      ['sendRichMessage', 'second *bold*', undefined],
      ['sendRichMessage', 'third', undefined],
    ]);
  });

  it('to a forum topic carry its message_thread_id', async () => {
    const chatKey = await chatFromTelegram(ing, -100300, 7);
    await reply(chatKey, ['in the topic']);
    await waitFor(async () => fake.sentTo(-100300).length === 1, { what: 'the reply' });
    expect(fake.sentTo(-100300)[0]).toMatchObject({ text: 'in the topic', threadId: 7 });
  });

  it("wait Telegram's retry_after after a 429, then deliver", async () => {
    const chatKey = await chatFromTelegram(ing, 50);
    fake.failNext(50, { code: 429, description: 'Too Many Requests: retry after 1', retryAfter: 1 });
    await reply(chatKey, ['after the flood wait']);
    await waitFor(async () => fake.sentTo(50).length === 1, { what: 'the delivered reply' });
    const refused = fake.refused.find((r) => r.chatId === '50')!;
    // The backoff alone would retry after 50 ms; retry_after says 1 s.
    expect(fake.sentTo(50)[0]!.at - refused.at).toBeGreaterThanOrEqual(950);
  });

  it('record a 403 (bot blocked) as delivery.failed, skip the item, and keep other chats receiving', async () => {
    const blocked = await chatFromTelegram(ing, 60);
    const other = await chatFromTelegram(ing, 61);
    fake.failNext(60, { code: 403, description: 'Forbidden: bot was blocked by the user' });
    const [lost] = await reply(blocked, ['you blocked me']);
    await reply(other, ['still here']);
    await waitFor(async () => fake.sentTo(61).length === 1, { what: 'the other chat’s reply' });
    const failed = await waitFor(
      async () => {
        const events = (await store.readEvents(blocked, undefined, 50)).filter(
          (e) => e.type === 'delivery.failed',
        );
        return events.length > 0 ? events : undefined;
      },
      { what: 'delivery.failed' },
    );
    expect(failed.map((e) => e.data)).toEqual([
      expect.objectContaining({
        itemId: lost,
        channel: 'telegram',
        error: expect.stringContaining('PermissionError'),
      }),
    ]);
    const counted = (await metrics.deliveryFailures.get()).values.find(
      (v) => v.labels.channel === 'telegram',
    );
    expect(counted?.value).toBe(1);
    expect(fake.sentTo(60)).toEqual([]);
    // The blocked chat's later items go on (the user may unblock the bot).
    await reply(blocked, ['unblocked']);
    await waitFor(async () => fake.sentTo(60).length === 1, { what: 'the later item' });
  });
});

describe('while a turn of a Telegram chat runs', () => {
  it('the bot shows as typing (sendChatAction) until the turn ends', async () => {
    const chatKey = await chatFromTelegram(ing, -100700);
    const typingBefore = fake.typing.length;
    const deps = turnDeps(
      redis,
      prefix,
      scriptedModel(async () => {
        // The model answers only once Telegram shows the bot typing in this chat.
        await waitFor(async () => fake.typing.some((t) => t.chatId === '-100700'), { what: 'typing' });
        return { toolCalls: [{ name: 'chat_send', input: { text: 'done thinking' } }] };
      }).model,
    );
    // The real Telegram sender, counting the typing calls the indicator makes.
    const telegram = senders.get('telegram')!;
    let asked = 0;
    const counted = new SenderRegistry([
      {
        channel: telegram.channel,
        send: (request) => telegram.send(request),
        typing: (threadId) => {
          asked++;
          return telegram.typing!(threadId);
        },
      },
    ]);
    const typing = new TypingIndicator(counted, silentLogger(), 100);
    const outcome = await runTurn({ ...deps, typing, deliver: (c) => enqueueDelivery(queue, c) }, chatKey);
    expect(outcome.status).toBe('done');
    expect(fake.typing.slice(typingBefore)[0]).toEqual({ chatId: '-100700', threadId: undefined });
    await waitFor(async () => fake.sentTo(-100700).length === 1, { what: 'the reply' });
    // Stopped with the turn: the calls asked before it ended have all reached Telegram (on a
    // loaded host the last may still be on its way when the turn returns), and none after it.
    const askedDuringTurn = asked;
    await waitFor(async () => fake.typing.length - typingBefore === askedDuringTurn, {
      what: 'the typing calls asked during the turn at the fake',
    });
    const after = fake.typing.length;
    await new Promise((r) => setTimeout(r, 300));
    expect(asked).toBe(askedDuringTurn);
    expect(fake.typing.length).toBe(after);
  });
});

describe('classifySendError', () => {
  it('maps the Chat SDK error classes to retry / failed', () => {
    const named = (name: string, extra: Record<string, unknown> = {}) =>
      Object.assign(new Error('x'), { name, ...extra });
    expect(classifySendError(named('AdapterRateLimitError', { retryAfter: 3 }))).toMatchObject({
      status: 'retry',
      afterMs: 3000,
    });
    expect(classifySendError(named('AdapterRateLimitError'))).not.toHaveProperty('afterMs');
    expect(classifySendError(named('PermissionError')).status).toBe('failed');
    expect(classifySendError(named('ResourceNotFoundError')).status).toBe('failed');
    expect(classifySendError(named('ValidationError')).status).toBe('failed');
    expect(classifySendError(named('NetworkError')).status).toBe('retry');
    expect(classifySendError(named('AuthenticationError')).status).toBe('retry');
  });
});
