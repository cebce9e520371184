import { expect } from 'vitest';
import { BOT, FakeTelegram, messageUpdate } from '../../src/fake-telegram/server.js';
import { type Config, loadConfig } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { type PlatformRuntime, startPlatformRuntime } from '../../src/shared/platforms/runtime.js';
import type { RedisClient } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { type TestIngress, testIngress } from './ingress.js';
import { REDIS_ENV } from './redis.js';

export const TELEGRAM_SECRET = 'test-secret_123';

/** The environment of a chatlane whose Telegram bot talks to `fake`. */
export function telegramEnv(prefix: string, fake: FakeTelegram, extra: Record<string, string> = {}) {
  return {
    ...REDIS_ENV,
    CHATLANE_PREFIX: prefix,
    TELEGRAM_BOT_TOKEN: BOT.token,
    TELEGRAM_WEBHOOK_SECRET_TOKEN: TELEGRAM_SECRET,
    TELEGRAM_API_BASE_URL: fake.url,
    ...extra,
  };
}

/** Its configuration and an initialized Chat SDK runtime on `redis`. */
export async function telegramRuntime(
  redis: RedisClient,
  prefix: string,
  fake: FakeTelegram,
): Promise<{ config: Config; runtime: PlatformRuntime }> {
  const config = loadConfig(telegramEnv(prefix, fake));
  return { config, runtime: await startPlatformRuntime(config, redis, silentLogger()) };
}

/** Headers Telegram sends with a webhook set up with our secret_token. */
export function telegramHeaders(secret: string | null = TELEGRAM_SECRET): Record<string, string> {
  return {
    'content-type': 'application/json',
    ...(secret !== null && { 'x-telegram-bot-api-secret-token': secret }),
  };
}

/** A chat that came in through `ing`'s Telegram webhook, so its replies have a telegram route. */
export async function chatFromTelegram(ing: TestIngress, chatId: number, topicId?: number): Promise<string> {
  const res = await ing.app.inject({
    method: 'POST',
    url: '/webhooks/telegram',
    headers: telegramHeaders(),
    payload: JSON.stringify(messageUpdate({ chatId, text: 'hi', ...(topicId !== undefined && { topicId }) })),
  });
  expect(res.statusCode).toBe(200);
  return topicId === undefined ? `telegram-chat-${chatId}` : `telegram-chat-${chatId}-topic-${topicId}`;
}

export interface TelegramSide {
  fake: FakeTelegram;
  config: Config;
  runtime: PlatformRuntime;
  /** An in-process ingress whose Telegram webhook answers every group message. */
  ing: TestIngress;
  store: ChatStore;
  close(): Promise<void>;
}

/** The fake Bot API and an ingress taking its webhooks, under `prefix`. */
export async function startTelegramSide(redis: RedisClient, prefix: string): Promise<TelegramSide> {
  const fake = await new FakeTelegram().start();
  const { config, runtime } = await telegramRuntime(redis, prefix, fake);
  const ing = await testIngress(redis, prefix, { platforms: { runtime, groupMode: 'all' } });
  return {
    fake,
    config,
    runtime,
    ing,
    store: new ChatStore(redis, { prefix, maxEvents: 100 }),
    async close() {
      await ing.close();
      await runtime.close();
      await fake.close();
    },
  };
}
