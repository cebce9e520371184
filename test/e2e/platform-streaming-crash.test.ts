import { describe, expect, it } from 'vitest';
import { BOT, messageUpdate } from '../../src/fake-telegram/server.js';
import { createQueue, type DeliveryJob, QUEUES } from '../../src/shared/jobs.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { deliveredAll } from '../helpers/platform-streaming.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';
import { startTelegramSide, TELEGRAM_SECRET, telegramHeaders } from '../helpers/telegram.js';

const LONG = 'the quick brown fox jumps over the lazy dog while the cat watches from the fence';

describe('PLATFORM_STREAMING=on: a worker killed while its reply streams to a Telegram group', () => {
  const stack = useStack('e2e-pstream', {
    roles: [],
    env: {
      PLATFORM_STREAMING: 'on',
      DELIVERY_IN_WORKER: 'false',
      // Short leases and locks: the takeover comes within a few seconds.
      TURN_LEASE_MS: '1500',
      JOB_LOCK_MS: '1500',
      STALLED_INTERVAL_MS: '500',
      DELIVERY_TIMEOUT_MS: '2000',
    },
  });

  it('kill -9 mid-stream: the half post is edited to the takeover’s committed reply; one message, the cursor past the item', async () => {
    const { redis, prefix, store } = stack;
    const tg = await startTelegramSide(redis, prefix);
    const queue = createQueue<DeliveryJob>(prefix, QUEUES.deliveries, redis);
    try {
      const env = {
        TELEGRAM_BOT_TOKEN: BOT.token,
        TELEGRAM_WEBHOOK_SECRET_TOKEN: TELEGRAM_SECRET,
        TELEGRAM_API_BASE_URL: tg.fake.url,
      };
      const chatId = -1004401;
      const chatKey = `telegram-chat-${chatId}`;
      const gates = stack.mock.state.chunkGates;
      // Held from its first piece until the worker is dead: it dies while the reply streams.
      gates.hold(chatKey);
      await stack.start('delivery', env);
      const doomed = await stack.start('worker', env);
      const res = await tg.ing.app.inject({
        method: 'POST',
        url: '/webhooks/telegram',
        headers: telegramHeaders(),
        payload: JSON.stringify(messageUpdate({ chatId, text: LONG })),
      });
      expect(res.statusCode).toBe(200);

      // The streamed post is up, the reply not yet written whole: the worker dies.
      await waitFor(async () => tg.fake.sentTo(chatId).length === 1, { what: 'the streamed post' });
      await doomed.kill('SIGKILL');
      gates.release(chatKey);
      const [post] = tg.fake.sentTo(chatId);
      const half = tg.fake.textNow(post!.messageId)!;
      expect(`echo: ${LONG}`.startsWith(half.replace(/\.\.\.$/, ''))).toBe(true);
      expect(half).not.toBe(`echo: ${LONG}`);
      expect(await store.readOutbox(chatKey, undefined, 10)).toEqual([]);
      await stack.start('worker', env);

      const items = await deliveredAll(redis, prefix, queue, chatKey, () =>
        store.readOutbox(chatKey, undefined, 10),
      );
      expect(items.map((i) => i.text)).toEqual([`echo: ${LONG}`]);
      const sent = tg.fake.sentTo(chatId);
      expect(sent).toHaveLength(1);
      expect(tg.fake.textNow(sent[0]!.messageId)).toBe(`echo: ${LONG}`);
      expect(tg.fake.editsTo(chatId).at(-1)!.text).toBe(`echo: ${LONG}`);
      expect(tg.fake.deleted).toEqual([]);
      expect((await new DeliveryStore(redis, prefix, 100).posts(chatKey)).post).toBeUndefined();
    } finally {
      await queue.close();
      await tg.close();
    }
  }, 60_000);
});
