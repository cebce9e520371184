import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { hasExited } from '../helpers/delivery-crash.js';
import {
  type FakeWhatsApp,
  startFakeWhatsApp,
  WHATSAPP_CHAT,
  WHATSAPP_TEXT_LIMIT,
  whatsappEnv,
  whatsappSays,
} from '../helpers/fake-whatsapp.js';
import { longAnswer, sentenceNumbers, upTo } from '../helpers/long-answer.js';
import { type PlatformStack, platformStack } from '../helpers/platform-stack.js';
import { type RoleProcess, startRole } from '../helpers/processes.js';
import { deletePrefix, REDIS_ENV, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/**
 * A reply too long for one WhatsApp message goes out as several, each recorded in Redis
 * (the item's part cursor) before the next is sent. A real `chatlane delivery` process is
 * SIGKILLed between two of them — the next part's request reaches the Graph API fake, which
 * never answers it — and a new process picks the chat up: every part arrives once, in order,
 * then the reply after it.
 */
const CHAT = WHATSAPP_CHAT;

const redis = testRedis();
let prefix: string;
let fake: FakeWhatsApp;
let stack: PlatformStack;
const procs: RoleProcess[] = [];

function env(): Record<string, string> {
  return { ...REDIS_ENV, CHATLANE_PREFIX: prefix, ...whatsappEnv(fake) };
}

/** A real `chatlane delivery` process whose WhatsApp sender talks to the fake Graph API. */
async function startDelivery(): Promise<RoleProcess> {
  const proc = await startRole('delivery', {
    ...env(),
    // Short lock, stall check and delivery lease (2 × 2 s + 1 s) so the takeover is quick.
    DELIVERY_TIMEOUT_MS: '2000',
    JOB_LOCK_MS: '1500',
    STALLED_INTERVAL_MS: '1000',
  });
  procs.push(proc);
  return proc;
}

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('splitcrash');
  fake = await startFakeWhatsApp();
  // The ingress (webhooks) in this process; delivery only in the processes started below.
  stack = await platformStack(redis, prefix, env(), { delivery: false });
  expect(await whatsappSays(stack.app)).toBe(200);
});
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.kill('SIGKILL')));
  await stack.close();
  await fake.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const numbers = sentenceNumbers;

describe('a delivery process killed between two parts of a split reply', () => {
  it('every part arrives once, in order, and the reply after it too', async () => {
    const doomed = await startDelivery();
    const answer = longAnswer(11_000);
    const all = numbers([answer]).length;
    // The third part's request arrives: the process has recorded two parts. It dies before
    // the Graph API answers (it never accepts this request).
    fake.hold(
      /\/messages$/,
      () => fake.texts().length === 2,
      async (res) => {
        await doomed.kill('SIGKILL');
        res.destroy();
      },
    );
    const [item, next] = await stack.reply(CHAT, [answer, 'the next reply']);
    await waitFor(hasExited(doomed), { what: 'the delivery process killed' });
    expect(fake.texts()).toHaveLength(2);
    const deliveries = new DeliveryStore(redis, prefix, 100);
    expect(await deliveries.state(CHAT)).toMatchObject({
      part: { itemId: item, sent: 2, parts: 3, format: 'whatsapp.1' },
    });

    await startDelivery();
    await waitFor(async () => fake.texts().at(-1) === 'the next reply', {
      timeoutMs: 30_000,
      what: 'the rest after the restart',
    });
    const texts = fake.texts();
    expect(texts).toHaveLength(4);
    for (const text of texts) expect(text.length).toBeLessThanOrEqual(WHATSAPP_TEXT_LIMIT);
    // Each part once, in order: the sentences run 0, 1, 2, … with none twice.
    expect(numbers(texts.slice(0, 3))).toEqual(upTo(all));
    expect(texts[3]).toBe('the next reply');
    await waitFor(async () => (await deliveries.state(CHAT)).part === undefined, {
      what: 'the part cursor cleared',
    });
    // The outbox record says the item went out as the three messages WhatsApp received, once
    // the second process moved the cursor past the reply after it too.
    await waitFor(async () => (await deliveries.state(CHAT)).deliveredTo === next, {
      what: 'both delivered',
    });
    const res = await stack.app.inject({
      method: 'GET',
      url: `/v1/chats/${encodeURIComponent(CHAT)}/outbox`,
    });
    expect((res.json() as { items: Array<{ id: string; parts?: number }> }).items).toEqual([
      expect.objectContaining({ id: item, parts: 3 }),
      expect.not.objectContaining({ parts: expect.anything() }),
    ]);
  }, 60_000);
});
