import { BOT, FakeTelegram, messageUpdate } from '../fake-telegram/server.js';
import type { EnabledPlatform } from '../shared/platforms/platform.js';
import { platformsFromEnv } from '../shared/platforms/registry.js';

const SECRET = 'demo-secret';

/** A fake Telegram Bot API for the demo and the Telegram platform pointed at it. */
export async function demoTelegram(): Promise<{ fake: FakeTelegram; platforms: EnabledPlatform[] }> {
  const fake = await new FakeTelegram().start();
  const { platforms, problems } = platformsFromEnv({
    TELEGRAM_BOT_TOKEN: BOT.token,
    TELEGRAM_WEBHOOK_SECRET_TOKEN: SECRET,
    TELEGRAM_API_BASE_URL: fake.url,
    TELEGRAM_BOT_USERNAME: BOT.username,
  });
  if (problems.length > 0) throw new Error(problems.join('\n'));
  return { fake, platforms };
}

/**
 * One message through `POST /webhooks/telegram` (as Telegram would send it, with the secret
 * token), then the agent's reply arriving at the fake API's sendRichMessage.
 */
export async function demoTelegramRoundTrip(ingressUrl: string, fake: FakeTelegram): Promise<void> {
  const chatId = 4242;
  const update = messageUpdate({
    chatId,
    text: 'Hello from Telegram!',
    from: { id: chatId, username: 'dana', first_name: 'Dana' },
  });
  const res = await fetch(`${ingressUrl}/webhooks/telegram`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': SECRET },
    body: JSON.stringify(update),
  });
  console.log(
    `\n── Telegram (fake Bot API ${fake.url})\nPOST /webhooks/telegram update ${update.update_id} "Hello from Telegram!" → ${res.status}`,
  );
  if (res.status !== 200) throw new Error(`the Telegram webhook answered ${res.status}: ${await res.text()}`);
  const deadline = Date.now() + 30_000;
  while (fake.sentTo(chatId).length === 0) {
    if (Date.now() > deadline) throw new Error('no reply reached the fake Telegram within 30s');
    await new Promise((r) => setTimeout(r, 100));
  }
  for (const sent of fake.sentTo(chatId)) {
    console.log(`  ← ${sent.method} chat_id=${sent.chatId}: ${sent.text}`);
  }
  console.log(`  (chatKey telegram-chat-${chatId}; typing shown ${fake.typing.length}×)`);
}
