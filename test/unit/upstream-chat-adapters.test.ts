import { DiscordAdapter } from '@chat-adapter/discord';
import { WhatsAppAdapter } from '@chat-adapter/whatsapp';
import { afterEach, describe, expect, it } from 'vitest';
import { discordFormat } from '../../src/shared/delivery/render/discord.js';
import { renderReply } from '../../src/shared/delivery/render/format.js';
import { whatsappFormat } from '../../src/shared/delivery/render/whatsapp.js';
import { silentLogger } from '../../src/shared/logger.js';
import { chatSdkLogger } from '../../src/shared/platforms/log.js';
import { DISCORD_APPLICATION_ID, discordKeys, startFakeDiscord } from '../helpers/fake-discord.js';
import { startFakeWhatsApp, WHATSAPP_PHONE_NUMBER_ID } from '../helpers/fake-whatsapp.js';

/**
 * Where a Chat SDK adapter (4.41) is wrong on its own, and chatlane's reply formats
 * (src/shared/delivery/render) route around it. Each `it.fails` below states what the adapter
 * should do and passes while the adapter does not: when an upgrade fixes the adapter, vitest
 * reports that test as failed, which is the signal to drop the workaround (and this test).
 * The adapters post to local fakes of the platforms' APIs, as chatlane's delivery does.
 */
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

const MARKDOWN = 'list [1] first point, math 2*3*4 and a_b_c, see [the docs](https://example.com/x)';

async function whatsappReceives(message: Parameters<WhatsAppAdapter['postMessage']>[1]): Promise<string[]> {
  const fake = await startFakeWhatsApp();
  closers.push(fake.close);
  const adapter = new WhatsAppAdapter({
    accessToken: 'EAAG-test-token',
    appSecret: 'app-secret',
    phoneNumberId: WHATSAPP_PHONE_NUMBER_ID,
    verifyToken: 'verify',
    userName: 'bot',
    apiUrl: fake.url,
    logger: chatSdkLogger(silentLogger()),
  });
  await adapter.postMessage(`whatsapp:${WHATSAPP_PHONE_NUMBER_ID}:15551234567`, message);
  return fake.texts();
}

describe('@chat-adapter/whatsapp alone', () => {
  it.fails('sends Markdown as WhatsApp shows it: no backslash escapes', async () => {
    // It sends `list \[1] first point`: a Markdown stringifier's escape, shown as typed.
    const [text] = await whatsappReceives({ markdown: MARKDOWN });
    expect(text).not.toContain('\\[');
  });

  it.fails('sends Markdown as WhatsApp shows it: no HTML character references', async () => {
    // It sends `&#x32;_&#x33;_&#x34;` for 2*3*4.
    const [text] = await whatsappReceives({ markdown: MARKDOWN });
    expect(text).not.toMatch(/&#x?\w+;/);
  });

  it.fails('sends a link as WhatsApp can show it (WhatsApp has no link syntax)', async () => {
    const [text] = await whatsappReceives({ markdown: MARKDOWN });
    expect(text).toContain('the docs (https://example.com/x)');
  });

  it("chatlane's WhatsApp format sends what the adapter should", async () => {
    const { parts } = renderReply(MARKDOWN, whatsappFormat);
    // Posted as `{ raw }`: the adapter sends the text as it is.
    expect(await whatsappReceives(parts[0]!.message)).toEqual([
      'list [1] first point, math 2*3*4 and a_b_c, see the docs (https://example.com/x)',
    ]);
  });
});

describe('@chat-adapter/discord alone', () => {
  const answer = Array.from({ length: 300 }, (_, i) => `Sentence ${i} of a long answer.`).join(' ');

  async function discordReceives(message: Parameters<DiscordAdapter['postMessage']>[1]): Promise<string[]> {
    const fake = await startFakeDiscord();
    closers.push(fake.close);
    const adapter = new DiscordAdapter({
      botToken: 'discord-bot-token-for-tests',
      publicKey: discordKeys().publicKeyHex,
      applicationId: DISCORD_APPLICATION_ID,
      apiUrl: fake.apiUrl,
      respondToChannelIds: [],
      logger: chatSdkLogger(silentLogger()),
    });
    await adapter.postMessage('discord:@me:1400', message);
    return fake.posts().map((p) => String(p.body.content));
  }

  it.fails('posts an answer longer than 2,000 characters whole (it cuts it to 1,997 and "...")', async () => {
    expect(answer.length).toBeGreaterThan(6000);
    const posted = await discordReceives({ markdown: answer });
    expect(posted.join(' ')).toContain('Sentence 299 of a long answer.');
  });

  it("chatlane's Discord format splits it into messages the adapter posts whole", async () => {
    const { parts } = renderReply(answer, discordFormat);
    expect(parts.length).toBeGreaterThan(3);
    const posted: string[] = [];
    for (const part of parts) posted.push(...(await discordReceives(part.message)));
    expect(posted.every((p) => p.length <= 2000)).toBe(true);
    expect(posted.join(' ')).toBe(answer);
  });
});
