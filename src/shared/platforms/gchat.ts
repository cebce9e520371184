import type { Adapter, Message } from 'chat';
import type { Logger } from '../logger.js';
import { anySet, urlProblem } from './env.js';
import { chatSdkLogger } from './log.js';
import type {
  PlatformEnvResult,
  PlatformMessageFacts,
  PlatformModule,
  PlatformVariable,
} from './platform.js';
import { prefixedChatKey, prefixedThreadId } from './thread-key.js';

/** A service account key (the JSON downloaded from Google Cloud). */
interface ServiceAccount {
  client_email: string;
  private_key: string;
  project_id?: string;
}

/**
 * What GOOGLE_CHAT_* configure (the adapter's own names; GOOGLE_CHAT_ENDPOINT_URL is
 * chatlane's, since the adapter takes the endpoint URL only in code). Direct Chat app
 * webhooks only: Workspace Events over Pub/Sub are not wired.
 */
export interface GChatSettings {
  credentials: ServiceAccount | undefined;
  useAdc: boolean;
  projectNumber: string | undefined;
  endpointUrl: string | undefined;
  botUserId: string | undefined;
  apiUrl: string | undefined;
}

const VARIABLES: readonly PlatformVariable[] = [
  {
    name: 'GOOGLE_CHAT_CREDENTIALS',
    required: 'this or GOOGLE_CHAT_USE_ADC',
    meaning: "the service account key JSON (client_email, private_key), the whole file's content",
  },
  {
    name: 'GOOGLE_CHAT_USE_ADC',
    required: 'this or GOOGLE_CHAT_CREDENTIALS',
    meaning:
      'true: Application Default Credentials instead of a key (on GCP, or GOOGLE_APPLICATION_CREDENTIALS)',
  },
  {
    name: 'GOOGLE_CHAT_PROJECT_NUMBER',
    required: 'this or GOOGLE_CHAT_ENDPOINT_URL',
    meaning: 'the project number, when it is the authentication audience of the Chat app (verifies webhooks)',
  },
  {
    name: 'GOOGLE_CHAT_ENDPOINT_URL',
    required: 'this or GOOGLE_CHAT_PROJECT_NUMBER',
    meaning:
      'the HTTP endpoint URL exactly as configured, when it is the authentication audience (verifies webhooks)',
  },
  {
    name: 'GOOGLE_CHAT_BOT_USER_ID',
    meaning: "the app's own user (users/…): exact self-message detection",
  },
  { name: 'GOOGLE_CHAT_API_URL', default: 'the Chat API', meaning: 'the Chat API base URL' },
];
const VARS = VARIABLES.map((v) => v.name);

/** The subset of a Chat API message chatlane reads (the adapter's `raw` event). */
interface RawEvent {
  message?: {
    name?: string;
    sender?: { name?: string; displayName?: string };
    space?: { type?: string; spaceType?: string };
  };
  space?: { name?: string; type?: string; spaceType?: string };
}

function credentialsOf(value: string | undefined, problems: string[]): ServiceAccount | undefined {
  if (value === undefined) return undefined;
  try {
    const parsed = JSON.parse(value) as Partial<ServiceAccount>;
    if (typeof parsed.client_email === 'string' && typeof parsed.private_key === 'string') {
      return parsed as ServiceAccount;
    }
  } catch {
    // reported below
  }
  problems.push('GOOGLE_CHAT_CREDENTIALS: must be the service account key JSON (client_email, private_key)');
  return undefined;
}

function fromEnv(env: Readonly<Record<string, string>>): PlatformEnvResult<GChatSettings> {
  if (!anySet(env, VARIABLES)) return { enabled: false };
  const problems = [
    ...urlProblem(env, 'GOOGLE_CHAT_ENDPOINT_URL'),
    ...urlProblem(env, 'GOOGLE_CHAT_API_URL'),
  ];
  const credentials = credentialsOf(env.GOOGLE_CHAT_CREDENTIALS, problems);
  const useAdc = env.GOOGLE_CHAT_USE_ADC === 'true';
  const present = VARS.filter((v) => env[v] !== undefined).join(', ');
  if (env.GOOGLE_CHAT_CREDENTIALS === undefined && !useAdc) {
    problems.push(
      `GOOGLE_CHAT_CREDENTIALS: missing: the Google Chat settings are half there (${present} set); set the service account key JSON (or GOOGLE_CHAT_USE_ADC=true)`,
    );
  }
  const projectNumber = env.GOOGLE_CHAT_PROJECT_NUMBER;
  const endpointUrl = env.GOOGLE_CHAT_ENDPOINT_URL;
  if (projectNumber === undefined && endpointUrl === undefined) {
    problems.push(
      `GOOGLE_CHAT_PROJECT_NUMBER: missing: the Google Chat settings are half there (${present} set); set the project number (or GOOGLE_CHAT_ENDPOINT_URL) so webhooks are verified`,
    );
  } else if (projectNumber !== undefined && !/^\d{5,20}$/.test(projectNumber)) {
    problems.push('GOOGLE_CHAT_PROJECT_NUMBER: must be the numeric project number');
  }
  if (problems.length > 0) return { enabled: true, problems };
  return {
    enabled: true,
    settings: {
      credentials,
      useAdc,
      projectNumber,
      endpointUrl,
      botUserId: env.GOOGLE_CHAT_BOT_USER_ID,
      apiUrl: env.GOOGLE_CHAT_API_URL,
    },
  };
}

const raw = (message: Message) => message.raw as RawEvent;
const spaceType = (r: RawEvent) =>
  r.space?.spaceType ?? r.space?.type ?? r.message?.space?.spaceType ?? r.message?.space?.type ?? 'SPACE';

export const gchat: PlatformModule<GChatSettings> = {
  name: 'gchat',
  variables: VARIABLES,
  typing: false,
  fromEnv,
  replies: async () => (await import('../delivery/render/gchat.js')).gchatReplies,
  describe: (s) => ({
    verifies: [s.projectNumber && 'project number', s.endpointUrl && 'endpoint URL']
      .filter(Boolean)
      .join(' + '),
    auth: s.useAdc ? 'application default credentials' : s.credentials?.client_email,
  }),
  async createAdapter(s: GChatSettings, logger: Logger): Promise<Adapter> {
    const { GoogleChatAdapter } = await import('@chat-adapter/gchat');
    const common = {
      logger: chatSdkLogger(logger.child({ platform: 'gchat' })),
      disableSignatureVerification: false,
      ...(s.projectNumber !== undefined && { googleChatProjectNumber: s.projectNumber }),
      ...(s.endpointUrl !== undefined && { endpointUrl: s.endpointUrl }),
      ...(s.botUserId !== undefined && { botUserId: s.botUserId }),
      ...(s.apiUrl !== undefined && { apiUrl: s.apiUrl }),
    };
    return s.credentials
      ? new GoogleChatAdapter({ ...common, credentials: s.credentials })
      : new GoogleChatAdapter({ ...common, useApplicationDefaultCredentials: true });
  },
  /** `gchat-spaces_2f<space>[:<thread, base64url>][:dm]` (the `/` of `spaces/` escaped). */
  chatKey: (threadId) => prefixedChatKey('gchat', threadId),
  threadIdOf: (chatKey) => prefixedThreadId('gchat', chatKey),
  metadata(message: Message, threadId: string): PlatformMessageFacts {
    const r = raw(message);
    return {
      chatId: r.space?.name ?? '',
      threadId,
      userId: message.author.userId,
      ...(message.author.fullName && { username: message.author.fullName }),
      messageId: r.message?.name ?? message.id,
      chatType: spaceType(r),
    };
  },
  isGroup: (message) => !/^(DM|DIRECT_MESSAGE)$/.test(spaceType(raw(message))),
  // Google Chat delivers a space message to the app only when it @mentions it (or is a
  // slash command): whatever arrives is addressed to the bot.
  isMention: () => true,
  unsupported: (message) => (message.author.isMe ? 'own message' : undefined),
};
