import type { Adapter, Message } from 'chat';
import type { Logger } from '../logger.js';
import { escapeChatKeyPart, unescapeChatKeyPart } from './chat-key.js';
import { anySet } from './env.js';
import { chatSdkLogger } from './log.js';
import type {
  PlatformEnvResult,
  PlatformMessageFacts,
  PlatformModule,
  PlatformVariable,
} from './platform.js';

/** What TELEGRAM_* configure (the adapter's own variable names). */
export interface TelegramSettings {
  botToken: string;
  /** Required in webhook mode: Telegram sends it in X-Telegram-Bot-Api-Secret-Token. */
  secretToken: string | undefined;
  apiUrl: string | undefined;
  userName: string | undefined;
  mode: 'webhook' | 'polling';
}

const VARIABLES: readonly PlatformVariable[] = [
  {
    name: 'TELEGRAM_BOT_TOKEN',
    required: true,
    meaning: "the bot token from BotFather ('<digits>:<secret>')",
  },
  {
    name: 'TELEGRAM_WEBHOOK_SECRET_TOKEN',
    required: 'in webhook mode',
    meaning:
      'the secret_token given to setWebhook, 1-256 characters of [A-Za-z0-9_-]; a webhook without it is refused (401)',
  },
  {
    name: 'TELEGRAM_API_BASE_URL',
    default: 'https://api.telegram.org',
    meaning: 'the Bot API base URL: a self-hosted Bot API server, or a local fake',
  },
  {
    name: 'TELEGRAM_BOT_USERNAME',
    default: 'from getMe',
    meaning: "the bot's @username (skips the getMe call at start)",
  },
  {
    name: 'TELEGRAM_MODE',
    default: 'webhook',
    meaning:
      'webhook, or polling: one ingress of the fleet pulls updates with getUpdates (no public URL needed)',
  },
];

/** Telegram's own rule for setWebhook's secret_token. */
const SECRET = /^[A-Za-z0-9_-]{1,256}$/;
const BOT_TOKEN = /^\d+:[A-Za-z0-9_-]+$/;

/** The subset of Telegram's message object chatlane reads (the adapter's `raw`). */
interface RawTelegramMessage {
  message_id: number;
  message_thread_id?: number;
  chat: { id: number; type: string; title?: string; username?: string };
  from?: { id: number; username?: string; first_name?: string };
}

function fromEnv(env: Readonly<Record<string, string>>): PlatformEnvResult<TelegramSettings> {
  if (!anySet(env, VARIABLES)) return { enabled: false };
  const problems: string[] = [];
  const botToken = env.TELEGRAM_BOT_TOKEN;
  const mode = env.TELEGRAM_MODE ?? 'webhook';
  if (!botToken) {
    problems.push(
      'TELEGRAM_BOT_TOKEN: missing: the Telegram settings are half there; set the bot token from BotFather',
    );
  } else if (!BOT_TOKEN.test(botToken)) {
    problems.push("TELEGRAM_BOT_TOKEN: is not a bot token ('<digits>:<secret>' from BotFather)");
  }
  if (mode !== 'webhook' && mode !== 'polling') {
    problems.push("TELEGRAM_MODE: must be 'webhook' (default) or 'polling'");
  }
  const secretToken = env.TELEGRAM_WEBHOOK_SECRET_TOKEN;
  if (mode === 'webhook' && !secretToken) {
    problems.push(
      'TELEGRAM_WEBHOOK_SECRET_TOKEN: missing: webhook mode needs the secret_token given to setWebhook (or set TELEGRAM_MODE=polling)',
    );
  } else if (secretToken && !SECRET.test(secretToken)) {
    problems.push('TELEGRAM_WEBHOOK_SECRET_TOKEN: must be 1-256 characters of [A-Za-z0-9_-] (Telegram rule)');
  }
  const apiUrl = env.TELEGRAM_API_BASE_URL;
  if (apiUrl !== undefined && !URL.canParse(apiUrl)) problems.push('TELEGRAM_API_BASE_URL: is not a URL');
  if (problems.length > 0 || !botToken) return { enabled: true, problems };
  return {
    enabled: true,
    settings: {
      botToken,
      secretToken,
      apiUrl: apiUrl?.replace(/\/+$/, ''),
      userName: env.TELEGRAM_BOT_USERNAME?.replace(/^@/, ''),
      mode: mode as TelegramSettings['mode'],
    },
  };
}

function raw(message: Message): RawTelegramMessage {
  return message.raw as RawTelegramMessage;
}

const PLAIN_THREAD = /^telegram:(-?\d+)(?::(\d+))?$/;
const CHAT_KEY = /^telegram-chat-(-?\d+)(?:-topic-(\d+))?$/;
const OTHER_PREFIX = 'telegram-thread-';

/**
 * The seeds' Telegram chatKeys: `telegram-chat-<chatId>` for a chat and
 * `telegram-chat-<chatId>-topic-<threadId>` for a forum topic. Any other thread id the adapter
 * may produce (business connections) becomes `telegram-thread-<escaped thread id>`.
 */
export function telegramChatKeyOf(threadId: string): string {
  const m = PLAIN_THREAD.exec(threadId);
  if (m) return m[2] === undefined ? `telegram-chat-${m[1]}` : `telegram-chat-${m[1]}-topic-${m[2]}`;
  return `${OTHER_PREFIX}${escapeChatKeyPart(threadId)}`;
}

export function telegramThreadIdOf(chatKey: string): string | undefined {
  const m = CHAT_KEY.exec(chatKey);
  if (m) return m[2] === undefined ? `telegram:${m[1]}` : `telegram:${m[1]}:${m[2]}`;
  if (!chatKey.startsWith(OTHER_PREFIX)) return undefined;
  const threadId = unescapeChatKeyPart(chatKey.slice(OTHER_PREFIX.length));
  return threadId?.startsWith('telegram:') ? threadId : undefined;
}

const FILE_LABEL: Record<string, string> = { image: 'photo', video: 'video', audio: 'audio', file: 'file' };

export const telegram: PlatformModule<TelegramSettings> = {
  name: 'telegram',
  variables: VARIABLES,
  typing: true,
  fromEnv,
  replies: async () => (await import('../delivery/render/telegram.js')).telegramReplies,
  describe: (s) => ({
    mode: s.mode,
    apiUrl: s.apiUrl ?? 'https://api.telegram.org',
    userName: s.userName ?? '(from getMe)',
  }),
  async createAdapter(s: TelegramSettings, logger: Logger): Promise<Adapter> {
    const { ChatlaneTelegramAdapter } = await import('./telegram-adapter.js');
    const adapter = new ChatlaneTelegramAdapter({
      botToken: s.botToken,
      // Never the adapter's own polling on initialize(): chatlane's poller starts it under
      // the fleet-wide lease. A polling deployment serves no webhook (the route answers 404),
      // so the adapter needs no webhook secret then.
      mode: 'webhook',
      ...(s.mode === 'polling' && { allowUnverifiedWebhooks: true }),
      logger: chatSdkLogger(logger.child({ platform: 'telegram' })),
      mentionOnReply: false,
      // Only streamed posts use it: a private chat sees drafts (Bot API sendMessageDraft /
      // sendRichMessageDraft) as the text is written, then the final message.
      nativeStreaming: true,
      ...(s.secretToken !== undefined && { secretToken: s.secretToken }),
      ...(s.apiUrl !== undefined && { apiUrl: s.apiUrl }),
      ...(s.userName !== undefined && { userName: s.userName }),
      // Telegram refuses getUpdates while a webhook is set: polling removes it first.
      longPolling: { deleteWebhook: true, timeout: 30 },
    });
    return adapter;
  },
  chatKey: telegramChatKeyOf,
  threadIdOf: telegramThreadIdOf,
  metadata(message: Message, threadId: string): PlatformMessageFacts {
    const r = raw(message);
    const files = message.attachments
      .filter((a) => a.fetchMetadata?.fileId)
      .map((a) => ({
        type: a.type,
        fileId: a.fetchMetadata?.fileId,
        fileUniqueId: a.fetchMetadata?.fileUniqueId,
        ...(a.mimeType && { mediaType: a.mimeType }),
        ...(a.name && { name: a.name }),
        ...(a.size !== undefined && { size: a.size }),
      }));
    const extra: Record<string, unknown> = {};
    if (r.message_thread_id !== undefined) extra.topicId = String(r.message_thread_id);
    if (files.length > 0) extra.files = files;
    return {
      chatId: String(r.chat.id),
      threadId,
      userId: message.author.userId,
      ...(message.author.userName && { username: message.author.userName }),
      messageId: String(r.message_id),
      chatType: r.chat.type,
      ...(Object.keys(extra).length > 0 && { extra }),
    };
  },
  isGroup: (message) => raw(message).chat.type !== 'private',
  notes: (message) =>
    message.attachments
      .filter((a) => a.fetchMetadata?.fileId)
      .map((a) => `[${FILE_LABEL[a.type] ?? a.type}: file_id ${a.fetchMetadata?.fileId}]`),
  unsupported: (message) => (message.metadata.edited ? 'edited' : undefined),
  polling: (s) => s.mode === 'polling',
};
