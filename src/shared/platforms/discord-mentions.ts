import type { DiscordFormatConverter } from '@chat-adapter/discord';
import { replaceBareMentions } from '@chat-adapter/shared';

const SNOWFLAKE = /^\d{15,21}$/;

/**
 * `@chat-adapter/discord` turns every bare `@name` in a message into `<@name>`, which Discord
 * shows as typed unless the name is a user id (a model's "thanks @alice" arrived as
 * "thanks <@alice>"). With this, only `@<user id>` becomes a mention and a name stays text.
 * Applied to the adapter's converter (./discord.ts) and to the reply format's
 * (src/shared/delivery/render/discord.ts), so what is measured is what is posted.
 */
export function onlyIdMentions<T extends DiscordFormatConverter>(converter: T): T {
  return Object.assign(converter, {
    convertMentionsToDiscord: (text: string) =>
      replaceBareMentions(text, (mention, name) => (SNOWFLAKE.test(name) ? `<@${name}>` : mention)),
  });
}
