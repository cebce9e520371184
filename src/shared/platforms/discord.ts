import type { DiscordFormatConverter } from '@chat-adapter/discord';
import type { Adapter, Message } from 'chat';
import type { Logger } from '../logger.js';
import { anySet, listVar, missingVars, urlProblem } from './env.js';
import { chatSdkLogger } from './log.js';
import type {
  PlatformEnvResult,
  PlatformMessageFacts,
  PlatformModule,
  PlatformVariable,
} from './platform.js';
import { prefixedChatKey, prefixedThreadId } from './thread-key.js';

/** What DISCORD_* configure (the adapter's own variable names). */
export interface DiscordSettings {
  botToken: string;
  publicKey: string;
  applicationId: string;
  /** REST base (`https://discord.com/api/v10` when unset). */
  apiUrl: string | undefined;
  mentionRoleIds: string[];
}

const VARIABLES: readonly PlatformVariable[] = [
  { name: 'DISCORD_BOT_TOKEN', required: true, meaning: 'the bot token from the Developer Portal → Bot' },
  {
    name: 'DISCORD_PUBLIC_KEY',
    required: true,
    meaning: 'the Public Key from General Information (verifies interactions)',
  },
  {
    name: 'DISCORD_APPLICATION_ID',
    required: true,
    meaning: 'the Application ID from General Information',
  },
  { name: 'DISCORD_API_URL', default: 'https://discord.com/api/v10', meaning: 'the REST API base URL' },
  {
    name: 'DISCORD_MENTION_ROLE_IDS',
    default: 'none',
    meaning: 'comma-separated role ids whose mention counts as a mention of the bot',
  },
];

/** The subset of a Discord message object chatlane reads (the adapter's `raw`). */
interface RawDiscordMessage {
  id: string;
  channel_id: string;
  guild_id?: string;
}

function fromEnv(env: Readonly<Record<string, string>>): PlatformEnvResult<DiscordSettings> {
  if (!anySet(env, VARIABLES)) return { enabled: false };
  const problems = [...missingVars(env, 'Discord', VARIABLES), ...urlProblem(env, 'DISCORD_API_URL')];
  const { DISCORD_BOT_TOKEN: botToken, DISCORD_PUBLIC_KEY: key, DISCORD_APPLICATION_ID: applicationId } = env;
  const publicKey = key?.trim().toLowerCase();
  if (publicKey !== undefined && !/^[0-9a-f]{64}$/.test(publicKey)) {
    problems.push('DISCORD_PUBLIC_KEY: must be the 64 hex characters shown as Public Key');
  }
  if (applicationId !== undefined && !/^\d{5,30}$/.test(applicationId)) {
    problems.push('DISCORD_APPLICATION_ID: must be the numeric application id');
  }
  if (problems.length > 0 || !botToken || !publicKey || !applicationId) return { enabled: true, problems };
  return {
    enabled: true,
    settings: {
      botToken,
      publicKey,
      applicationId,
      apiUrl: env.DISCORD_API_URL?.replace(/\/+$/, ''),
      mentionRoleIds: listVar(env, 'DISCORD_MENTION_ROLE_IDS'),
    },
  };
}

const raw = (message: Message) => message.raw as RawDiscordMessage;

export const discord: PlatformModule<DiscordSettings> = {
  name: 'discord',
  variables: VARIABLES,
  typing: true,
  fromEnv,
  replies: async () => (await import('../delivery/render/discord.js')).discordReplies,
  describe: (s) => ({ applicationId: s.applicationId, apiUrl: s.apiUrl ?? 'https://discord.com/api/v10' }),
  async createAdapter(s: DiscordSettings, logger: Logger): Promise<Adapter> {
    // With the adapter: the error classes come from the Chat SDK, loaded only for a platform.
    const [{ DiscordAdapter }, { discordSendError }, { onlyIdMentions }] = await Promise.all([
      import('@chat-adapter/discord'),
      import('./discord-errors.js'),
      import('./discord-mentions.js'),
    ]);
    class ChatlaneDiscordAdapter extends DiscordAdapter {
      protected override async discordFetch(path: string, method: string, body?: unknown): Promise<Response> {
        try {
          return await super.discordFetch(path, method, body);
        } catch (err) {
          throw discordSendError(err);
        }
      }
    }
    const adapter = new ChatlaneDiscordAdapter({
      botToken: s.botToken,
      publicKey: s.publicKey,
      applicationId: s.applicationId,
      mentionRoleIds: s.mentionRoleIds,
      respondToChannelIds: [],
      logger: chatSdkLogger(logger.child({ platform: 'discord' })),
      ...(s.apiUrl !== undefined && { apiUrl: s.apiUrl }),
    });
    onlyIdMentions((adapter as unknown as { formatConverter: DiscordFormatConverter }).formatConverter);
    return adapter;
  },
  /**
   * `discord-<guild>:<channel>[:<thread>]` (`@me` for DMs): a mention in a channel opens a
   * Discord thread (the adapter's model) and that thread is the chat.
   */
  chatKey: (threadId) => prefixedChatKey('discord', threadId),
  threadIdOf: (chatKey) => prefixedThreadId('discord', chatKey),
  metadata(message: Message, threadId: string): PlatformMessageFacts {
    const r = raw(message);
    return {
      chatId: r.channel_id,
      threadId,
      userId: message.author.userId,
      ...(message.author.userName && { username: message.author.userName }),
      messageId: r.id,
      chatType: r.guild_id ? 'guild' : 'dm',
      ...(r.guild_id && { extra: { guildId: r.guild_id } }),
    };
  },
  isGroup: (message) => raw(message).guild_id !== undefined,
  unsupported: (message) => (message.author.isMe ? 'own message' : undefined),
};
