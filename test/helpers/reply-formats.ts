import { discordFormat } from '../../src/shared/delivery/render/discord.js';
import type { ReplyFormat } from '../../src/shared/delivery/render/format.js';
import { gchatFormat } from '../../src/shared/delivery/render/gchat.js';
import { slackFormat } from '../../src/shared/delivery/render/slack.js';
import { teamsFormat } from '../../src/shared/delivery/render/teams.js';
import { telegramClassicFormat, telegramRichFormat } from '../../src/shared/delivery/render/telegram.js';
import { whatsappFormat } from '../../src/shared/delivery/render/whatsapp.js';

/** Every reply format, by the name its corpus folder has (test/fixtures/reply-corpus/<name>/). */
export const REPLY_FORMATS: Record<string, ReplyFormat> = {
  whatsapp: whatsappFormat,
  'telegram-rich': telegramRichFormat,
  'telegram-classic': telegramClassicFormat,
  slack: slackFormat,
  discord: discordFormat,
  teams: teamsFormat,
  gchat: gchatFormat,
};

/** A text's size as the format counts it against its limit. */
export function sizeIn(format: ReplyFormat, text: string): number {
  return format.measure ? format.measure(text) : text.length;
}
