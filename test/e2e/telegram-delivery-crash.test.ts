import type { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createQueue, type DeliveryJob, QUEUES } from '../../src/shared/jobs.js';
import { waitReady } from '../../src/shared/redis.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { hasExited, killInsideAcceptWindow } from '../helpers/delivery-crash.js';
import { replyAsTurn } from '../helpers/delivery-worker.js';
import { type RoleProcess, startRole } from '../helpers/processes.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { chatFromTelegram, startTelegramSide, type TelegramSide, telegramEnv } from '../helpers/telegram.js';

const redis = testRedis();
let prefix: string;
let tg: TelegramSide;
let queue: Queue<DeliveryJob>;
const procs: RoleProcess[] = [];

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('tgdc');
  tg = await startTelegramSide(redis, prefix);
  queue = createQueue<DeliveryJob>(prefix, QUEUES.deliveries, redis);
});
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.kill('SIGKILL')));
  await queue.close();
  await tg.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

/** A real `chatlane delivery` process whose Telegram sender talks to the fake Bot API. */
async function startDelivery(): Promise<RoleProcess> {
  const proc = await startRole(
    'delivery',
    telegramEnv(prefix, tg.fake, {
      // Short lock, stall check and delivery lease (2 × 2 s + 1 s) so the takeover is quick. Not
      // shorter: on a loaded host a send slower than the timeout is abandoned and sent again,
      // which is at-least-once working as designed but a third copy of the item in this test.
      DELIVERY_TIMEOUT_MS: '2000',
      JOB_LOCK_MS: '1500',
      STALLED_INTERVAL_MS: '1000',
    }),
  );
  procs.push(proc);
  return proc;
}

/**
 * Telegram's sendRichMessage carries no outbox item id (the Chat SDK sender posts only the text to
 * the chat/thread; Telegram assigns its own message_id), so the fake sees items by their text:
 * every reply here has a distinct text, which stands for its item id.
 */
async function killAfterAccept(chatId: number, answer: boolean): Promise<void> {
  const doomed = await startDelivery();
  const chatKey = await chatFromTelegram(tg.ing, chatId);
  await replyAsTurn(tg.store, queue, chatKey, ['one']);
  await waitFor(async () => tg.fake.sentTo(chatId).length === 1, { what: 'the first reply' });

  // Several items wait; the fake accepts the first of them, freezes the delivery process so it
  // cannot move its cursor, answers (or not), and kills it.
  tg.fake.onNextAccept = (send, res) => killInsideAcceptWindow(doomed, res, answer ? send : undefined);
  await replyAsTurn(tg.store, queue, chatKey, ['two', 'three', 'four']);
  await waitFor(hasExited(doomed), { what: 'the delivery process killed' });
  // One more reply is written while nobody delivers.
  await replyAsTurn(tg.store, queue, chatKey, ['five']);
  const ids = (await tg.store.readOutbox(chatKey, undefined, 100)).map((i) => i.id);
  expect(ids).toHaveLength(5);
  const sent = () => tg.fake.sentTo(chatId).map((s) => s.text);
  expect(sent()).toEqual(['one', 'two']);
  const deliveries = new DeliveryStore(redis, prefix, 100);
  // The crash left the cursor on the item before the accepted one.
  expect((await deliveries.state(chatKey)).deliveredTo).toBe(ids[0]);

  await startDelivery();
  await waitFor(async () => sent().at(-1) === 'five', { timeoutMs: 30_000, what: 'the last reply' });
  // The accepted item came again before the next one; nothing else repeats or reorders.
  expect(sent()).toEqual(['one', 'two', 'two', 'three', 'four', 'five']);
  await waitFor(async () => (await deliveries.state(chatKey)).deliveredTo === ids[4], {
    what: 'the cursor past the last item',
  });
}

describe('a Telegram delivery process killed after sendRichMessage accepted an item', () => {
  it('whose answer was sent but never read: the item arrives twice, then the rest in order, and the cursor ends past all items', async () => {
    await killAfterAccept(4201, true);
  }, 60_000);

  it('killed before it could answer: the same', async () => {
    await killAfterAccept(4202, false);
  }, 60_000);
});
