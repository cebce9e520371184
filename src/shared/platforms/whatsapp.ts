import type { Adapter, Message, WebhookOptions } from 'chat';
import type { Logger } from '../logger.js';
import { anySet, missingVars, urlProblem } from './env.js';
import { chatSdkLogger } from './log.js';
import type {
  PlatformEnvResult,
  PlatformMessageFacts,
  PlatformModule,
  PlatformVariable,
} from './platform.js';
import { prefixedChatKey, prefixedThreadId } from './thread-key.js';

/** What WHATSAPP_* configure (the adapter's own variable names; WhatsApp Cloud API). */
export interface WhatsAppSettings {
  accessToken: string;
  appSecret: string;
  phoneNumberId: string;
  verifyToken: string;
  /** Graph API base (`https://graph.facebook.com` when unset); the adapter appends `/v25.0`. */
  apiUrl: string | undefined;
  userName: string | undefined;
}

const VARIABLES: readonly PlatformVariable[] = [
  {
    name: 'WHATSAPP_ACCESS_TOKEN',
    required: true,
    meaning: 'the access token from WhatsApp → API Setup (a System User token in production)',
  },
  {
    name: 'WHATSAPP_APP_SECRET',
    required: true,
    meaning: 'the App Secret from App Settings → Basic (verifies X-Hub-Signature-256)',
  },
  {
    name: 'WHATSAPP_PHONE_NUMBER_ID',
    required: true,
    meaning: 'the Phone Number ID from WhatsApp → API Setup',
  },
  {
    name: 'WHATSAPP_VERIFY_TOKEN',
    required: true,
    meaning: 'the Verify Token you enter in the Meta webhook configuration',
  },
  {
    name: 'WHATSAPP_API_URL',
    default: 'https://graph.facebook.com',
    meaning: 'the Graph API base URL (the adapter appends its API version)',
  },
  {
    name: 'WHATSAPP_BOT_USERNAME',
    default: 'whatsapp-bot',
    meaning: "the bot's user name as the adapter reports it",
  },
];

/** The adapter's `raw` for an inbound message. */
interface RawWhatsApp {
  message: { id: string; from?: string; type?: string; context?: { id?: string } };
  contact?: { profile?: { name?: string }; wa_id?: string };
  phoneNumberId: string;
  userId: string;
}

function fromEnv(env: Readonly<Record<string, string>>): PlatformEnvResult<WhatsAppSettings> {
  if (!anySet(env, VARIABLES)) return { enabled: false };
  const problems = [...missingVars(env, 'WhatsApp', VARIABLES), ...urlProblem(env, 'WHATSAPP_API_URL')];
  const id = env.WHATSAPP_PHONE_NUMBER_ID;
  if (id !== undefined && !/^\d{1,30}$/.test(id))
    problems.push('WHATSAPP_PHONE_NUMBER_ID: must be the numeric id');
  const {
    WHATSAPP_ACCESS_TOKEN: accessToken,
    WHATSAPP_APP_SECRET: appSecret,
    WHATSAPP_VERIFY_TOKEN: verifyToken,
  } = env;
  if (problems.length > 0 || !accessToken || !appSecret || !id || !verifyToken)
    return { enabled: true, problems };
  return {
    enabled: true,
    settings: {
      accessToken,
      appSecret,
      phoneNumberId: id,
      verifyToken,
      apiUrl: env.WHATSAPP_API_URL?.replace(/\/+$/, ''),
      userName: env.WHATSAPP_BOT_USERNAME,
    },
  };
}

const raw = (message: Message) => message.raw as RawWhatsApp;

export const whatsapp: PlatformModule<WhatsAppSettings> = {
  name: 'whatsapp',
  variables: VARIABLES,
  // The adapter's typing call needs the inbound message id from its own thread history.
  typing: false,
  verifiesWithGet: true,
  fromEnv,
  replies: async () => (await import('../delivery/render/whatsapp.js')).whatsappReplies,
  describe: (s) => ({ phoneNumberId: s.phoneNumberId, apiUrl: s.apiUrl ?? 'https://graph.facebook.com' }),
  async createAdapter(s: WhatsAppSettings, logger: Logger): Promise<Adapter> {
    // With the adapter: the error classes come from the Chat SDK, loaded only for a platform.
    const [{ WhatsAppAdapter }, { whatsappSendError }] = await Promise.all([
      import('@chat-adapter/whatsapp'),
      import('./whatsapp-errors.js'),
    ]);
    /** Graph API failures as Chat SDK errors delivery can classify (see ./whatsapp-errors.ts). */
    class ChatlaneWhatsAppAdapter extends WhatsAppAdapter {
      /**
       * The adapter walks `entry[].changes[]` without checking the shape: a signed body of
       * another shape would throw (500 and Meta's retries). Answer 400 instead; the
       * signature has been checked by then, so this tells a stranger nothing.
       */
      override async handleWebhook(request: Request, options?: WebhookOptions): Promise<Response> {
        try {
          return await super.handleWebhook(request, options);
        } catch (err) {
          if (err instanceof TypeError) return new Response('Invalid JSON payload shape', { status: 400 });
          throw err;
        }
      }

      protected override async graphApiRequest<T = unknown>(path: string, body: unknown): Promise<T> {
        try {
          return await super.graphApiRequest<T>(path, body);
        } catch (err) {
          throw whatsappSendError(err);
        }
      }
    }
    return new ChatlaneWhatsAppAdapter({
      accessToken: s.accessToken,
      appSecret: s.appSecret,
      phoneNumberId: s.phoneNumberId,
      verifyToken: s.verifyToken,
      userName: s.userName ?? 'whatsapp-bot',
      logger: chatSdkLogger(logger.child({ platform: 'whatsapp' })),
      ...(s.apiUrl !== undefined && { apiUrl: s.apiUrl }),
    });
  },
  /** `whatsapp-<phone number id>:<user>`: one chat per business number and person (all DMs). */
  chatKey: (threadId) => prefixedChatKey('whatsapp', threadId),
  threadIdOf: (chatKey) => prefixedThreadId('whatsapp', chatKey),
  metadata(message: Message, threadId: string): PlatformMessageFacts {
    const r = raw(message);
    const extra: Record<string, unknown> = { phoneNumberId: r.phoneNumberId };
    if (r.message.type) extra.messageType = r.message.type;
    const media = message.attachments
      .filter((a) => a.fetchMetadata?.mediaId)
      .map((a) => ({
        type: a.type,
        mediaId: a.fetchMetadata?.mediaId,
        ...(a.mimeType && { mediaType: a.mimeType }),
      }));
    if (media.length > 0) extra.files = media;
    return {
      chatId: r.userId,
      threadId,
      userId: r.userId,
      ...(r.contact?.profile?.name && { username: r.contact.profile.name }),
      messageId: r.message.id,
      chatType: 'private',
      extra,
    };
  },
  isGroup: () => false,
  // Media are ids on the Graph API, downloadable only with the access token.
  notes: (message) =>
    message.attachments
      .filter((a) => a.fetchMetadata?.mediaId)
      .map((a) => `[${a.type}: media id ${a.fetchMetadata?.mediaId}]`),
};
