import type { Adapter, Message } from 'chat';
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

/** What TEAMS_* configure (the adapter's own variable names; client-secret auth). */
export interface TeamsSettings {
  appId: string;
  appPassword: string;
  /** Set: a SingleTenant bot of this Entra tenant. Unset: MultiTenant. */
  appTenantId: string | undefined;
  /** Bot Connector base for sovereign clouds (GCC-High, ...). */
  apiUrl: string | undefined;
}

const VARIABLES: readonly PlatformVariable[] = [
  { name: 'TEAMS_APP_ID', required: true, meaning: 'the Microsoft App ID of the Azure Bot' },
  {
    name: 'TEAMS_APP_PASSWORD',
    required: true,
    meaning: 'a client secret of the Azure Bot app registration',
  },
  {
    name: 'TEAMS_APP_TENANT_ID',
    default: 'multi-tenant',
    meaning: 'the Entra tenant of a Single Tenant bot',
  },
  {
    name: 'TEAMS_API_URL',
    default: 'public cloud',
    meaning: 'the Bot Connector base URL of a sovereign cloud (GCC-High, …)',
  },
];

/** The subset of a Bot Framework activity chatlane reads (the adapter's `raw`). */
interface RawActivity {
  id?: string;
  conversation?: { id?: string; conversationType?: string; isGroup?: boolean; tenantId?: string };
  from?: { id?: string; name?: string; aadObjectId?: string };
}

function fromEnv(env: Readonly<Record<string, string>>): PlatformEnvResult<TeamsSettings> {
  if (!anySet(env, VARIABLES)) return { enabled: false };
  const problems = [...missingVars(env, 'Teams', VARIABLES), ...urlProblem(env, 'TEAMS_API_URL')];
  const { TEAMS_APP_ID: appId, TEAMS_APP_PASSWORD: appPassword } = env;
  if (appId !== undefined && !/^[0-9a-f-]{36}$/i.test(appId)) problems.push('TEAMS_APP_ID: must be a GUID');
  if (problems.length > 0 || !appId || !appPassword) return { enabled: true, problems };
  return {
    enabled: true,
    settings: { appId, appPassword, appTenantId: env.TEAMS_APP_TENANT_ID, apiUrl: env.TEAMS_API_URL },
  };
}

const raw = (message: Message) => message.raw as RawActivity;

export const teams: PlatformModule<TeamsSettings> = {
  name: 'teams',
  variables: VARIABLES,
  typing: true,
  fromEnv,
  replies: async () => (await import('../delivery/render/teams.js')).teamsReplies,
  describe: (s) => ({ appId: s.appId, tenant: s.appTenantId ?? '(multi-tenant)' }),
  async createAdapter(s: TeamsSettings, logger: Logger): Promise<Adapter> {
    const { TeamsAdapter } = await import('@chat-adapter/teams');
    return new TeamsAdapter({
      appId: s.appId,
      appPassword: s.appPassword,
      appType: s.appTenantId ? 'SingleTenant' : 'MultiTenant',
      logger: chatSdkLogger(logger.child({ platform: 'teams' })),
      ...(s.appTenantId !== undefined && { appTenantId: s.appTenantId }),
      ...(s.apiUrl !== undefined && { apiUrl: s.apiUrl }),
    });
  },
  /**
   * `teams-<conversation>:<service url>[:type]` in the adapter's base64url form (`_` escaped);
   * a key that would pass 200 characters is hashed (see ./thread-key.ts).
   */
  chatKey: (threadId) => prefixedChatKey('teams', threadId),
  threadIdOf: (chatKey) => prefixedThreadId('teams', chatKey),
  metadata(message: Message, threadId: string): PlatformMessageFacts {
    const r = raw(message);
    return {
      chatId: r.conversation?.id ?? '',
      threadId,
      userId: message.author.userId,
      ...(message.author.userName && { username: message.author.userName }),
      messageId: r.id ?? message.id,
      chatType: r.conversation?.conversationType ?? (r.conversation?.isGroup ? 'groupChat' : 'personal'),
      ...(r.conversation?.tenantId && { extra: { tenantId: r.conversation.tenantId } }),
    };
  },
  isGroup: (message) => (raw(message).conversation?.conversationType ?? 'personal') !== 'personal',
  unsupported: (message) => (message.author.isMe ? 'own message' : undefined),
};
