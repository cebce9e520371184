import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FakeTelegram, messageUpdate } from '../../src/fake-telegram/server.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { type RoleProcess, startRole } from '../helpers/processes.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { telegramEnv } from '../helpers/telegram.js';

const redis = testRedis();
let prefix: string;
let fake: FakeTelegram;
let store: ChatStore;
const procs: RoleProcess[] = [];

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('tgp');
  fake = await new FakeTelegram().start();
  store = new ChatStore(redis, { prefix, maxEvents: 100 });
});
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.kill('SIGKILL')));
  await fake.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const tookLease = (p: RoleProcess) => p.logs.some((l) => l.msg === 'poller lease taken: polling');

/** Pushes one update per chat and returns the message ids chatlane must store for them. */
function pushRound(chats: number[], text: string, updateIds: number[] = []): Map<string, string> {
  const expected = new Map<string, string>();
  for (const chatId of chats) {
    const update = messageUpdate({ chatId, text });
    updateIds.push(update.update_id);
    fake.pushUpdate(update);
    expected.set(`telegram-chat-${chatId}`, `telegram:${chatId}:${update.message.message_id}`);
  }
  return expected;
}

async function storedIds(chatKey: string): Promise<string[]> {
  return (await store.readAllPending(chatKey)).map((m) => m.id);
}

describe('a half-configured platform', () => {
  it('stops the ingress before it listens, naming the missing variable', async () => {
    const env = telegramEnv(prefix, fake, { TELEGRAM_WEBHOOK_SECRET_TOKEN: '' });
    await expect(startRole('ingress', env)).rejects.toThrow(
      /exited with 2 before it was ready: [\s\S]*TELEGRAM_WEBHOOK_SECRET_TOKEN: missing/,
    );
  });
});

describe('Telegram long polling (TELEGRAM_MODE=polling) with two ingress processes', () => {
  it('has one poller at a time, ingests each update once, and a survivor takes over when the holder dies', async () => {
    const env = telegramEnv(prefix, fake, {
      TELEGRAM_MODE: 'polling',
      TELEGRAM_WEBHOOK_SECRET_TOKEN: '',
      POLLER_LEASE_MS: '1000',
    });
    procs.push(...(await Promise.all([startRole('ingress', env), startRole('ingress', env)])));
    // The start-up log names the enabled platforms.
    expect(procs[0]!.logs.find((l) => l.msg === 'platforms enabled: telegram')).toMatchObject({
      platforms: { telegram: { mode: 'polling', apiUrl: fake.url } },
    });
    const chats = [101, 102, 103, 104, 105];

    const first = pushRound(chats, 'round one');
    for (const [chatKey, id] of first) {
      await waitFor(async () => (await storedIds(chatKey)).includes(id), { what: `${chatKey} round one` });
    }
    const holder = procs.find(tookLease)!;
    const survivor = procs.find((p) => p !== holder)!;
    expect(tookLease(survivor)).toBe(false);

    // The webhook route is off in polling mode.
    const res = await fetch(`${survivor.url}/webhooks/telegram`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('PLATFORM_NOT_ENABLED');

    await holder.kill('SIGKILL');
    // The process has exited, but the fake may not have seen its long-poll socket close yet:
    // round two pushed before that would be "served" to the dead connection (as Telegram would
    // hand it out, unconfirmed) and read again by the survivor. Round two is meant to arrive
    // after the holder is gone, so wait until the fake knows it is.
    await waitFor(async () => fake.inFlight === 0, { what: "the dead poller's getUpdates closed" });
    const secondUpdates: number[] = [];
    const second = pushRound(chats, 'round two', secondUpdates);
    for (const [chatKey, id] of second) {
      await waitFor(async () => (await storedIds(chatKey)).includes(id), { what: `${chatKey} round two` });
    }
    expect(tookLease(survivor)).toBe(true);

    // Each update stored exactly once, in order, per chat.
    for (const chatKey of first.keys()) {
      expect(await storedIds(chatKey)).toEqual([first.get(chatKey), second.get(chatKey)]);
    }
    // Never two getUpdates at once: one poller at a time, also across the takeover; and the
    // updates pushed after the takeover were read once (round one may be read again by the
    // successor if the holder died before saving its offset: stored once all the same).
    expect(fake.maxInFlight).toBe(1);
    expect(secondUpdates.map((id) => fake.served.get(id))).toEqual(secondUpdates.map(() => 1));
  });
});
