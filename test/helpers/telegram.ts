import { type Config, loadConfig } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { type PlatformRuntime, startPlatformRuntime } from '../../src/shared/platforms/runtime.js';
import type { RedisClient } from '../../src/shared/redis.js';
import { BOT, type FakeTelegram } from './fake-telegram.js';
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
