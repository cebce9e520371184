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

/** What SLACK_* configure (the adapter's own variable names; single-workspace bot). */
export interface SlackSettings {
  botToken: string;
  signingSecret: string;
  /** Web API base (`https://slack.com/api/` when unset): GovSlack, a gateway, a local fake. */
  apiUrl: string | undefined;
}

const VARIABLES: readonly PlatformVariable[] = [
  {
    name: 'SLACK_BOT_TOKEN',
    required: true,
    meaning: 'the Bot User OAuth Token (xoxb-...) from OAuth & Permissions',
  },
  {
    name: 'SLACK_SIGNING_SECRET',
    required: true,
    meaning: 'the Signing Secret from Basic Information → App Credentials',
  },
  {
    name: 'SLACK_API_URL',
    default: 'https://slack.com/api/',
    meaning: 'the Web API base URL: GovSlack, a gateway, a local fake',
  },
];

/** The subset of a Slack message event chatlane reads (the adapter's `raw`). */
interface RawSlackEvent {
  channel?: string;
  channel_type?: string;
  user?: string;
  ts?: string;
  thread_ts?: string;
  team?: string;
  team_id?: string;
  files?: { id?: string; name?: string; mimetype?: string }[];
}

function fromEnv(env: Readonly<Record<string, string>>): PlatformEnvResult<SlackSettings> {
  if (!anySet(env, VARIABLES)) return { enabled: false };
  const problems = [...missingVars(env, 'Slack', VARIABLES), ...urlProblem(env, 'SLACK_API_URL')];
  const { SLACK_BOT_TOKEN: botToken, SLACK_SIGNING_SECRET: signingSecret } = env;
  if (botToken !== undefined && !/^xox[bp]-/.test(botToken)) {
    problems.push(
      'SLACK_BOT_TOKEN: is not a bot token (xoxb-...); OAuth multi-workspace installs are not supported',
    );
  }
  if (problems.length > 0 || !botToken || !signingSecret) return { enabled: true, problems };
  return { enabled: true, settings: { botToken, signingSecret, apiUrl: env.SLACK_API_URL } };
}

const raw = (message: Message) => message.raw as RawSlackEvent;

export const slack: PlatformModule<SlackSettings> = {
  name: 'slack',
  variables: VARIABLES,
  // Slack shows no "typing" for bots outside assistant threads.
  typing: false,
  fromEnv,
  replies: async () => (await import('../delivery/render/slack.js')).slackReplies,
  describe: (s) => ({ apiUrl: s.apiUrl ?? 'https://slack.com/api/' }),
  async createAdapter(s: SlackSettings, logger: Logger): Promise<Adapter> {
    // With the adapter: the error classes come from the Chat SDK, loaded only for a platform.
    const [{ SlackAdapter }, { slackSendError }] = await Promise.all([
      import('@chat-adapter/slack'),
      import('./slack-errors.js'),
    ]);
    /**
     * The Web API client's errors carry Slack's own codes; delivery classifies Chat SDK
     * errors (rate limit with retry-after, permission, not found), so translate here.
     */
    class ChatlaneSlackAdapter extends SlackAdapter {
      protected override handleSlackError(error: unknown): never {
        throw slackSendError(error);
      }
    }
    return new ChatlaneSlackAdapter({
      botToken: s.botToken,
      signingSecret: s.signingSecret,
      mode: 'webhook',
      logger: chatSdkLogger(logger.child({ platform: 'slack' })),
      ...(s.apiUrl !== undefined && { apiUrl: s.apiUrl }),
      // Delivery owns retries (its backoff, its attempt count, the platform's Retry-After):
      // the client must answer at once instead of sleeping and retrying inside a send.
      webClientOptions: { rejectRateLimitedCalls: true, retryConfig: { retries: 0 } },
    });
  },
  /**
   * `slack-<channel>:<thread ts>`: a channel message and its thread replies share the thread
   * of the top message (the adapter's thread model: every top-level message in a channel
   * opens a thread, and the reply goes there); a DM is one chat, `slack-<channel>:`.
   */
  chatKey: (threadId) => prefixedChatKey('slack', threadId),
  threadIdOf: (chatKey) => prefixedThreadId('slack', chatKey),
  metadata(message: Message, threadId: string): PlatformMessageFacts {
    const r = raw(message);
    const extra: Record<string, unknown> = {};
    const team = r.team ?? r.team_id;
    if (team) extra.teamId = team;
    if (r.thread_ts) extra.threadTs = r.thread_ts;
    const files = (r.files ?? []).map((f) => ({
      ...(f.id && { fileId: f.id }),
      ...(f.name && { name: f.name }),
      ...(f.mimetype && { mediaType: f.mimetype }),
    }));
    if (files.length > 0) extra.files = files;
    return {
      chatId: r.channel ?? '',
      threadId,
      ...(r.user && { userId: r.user }),
      ...(message.author.userName && { username: message.author.userName }),
      messageId: r.ts ?? message.id,
      chatType: r.channel_type ?? 'channel',
      ...(Object.keys(extra).length > 0 && { extra }),
    };
  },
  isGroup: (message) => raw(message).channel_type !== 'im',
  // Slack files sit behind the bot token (url_private): a model provider cannot fetch them.
  notes: (message) => (raw(message).files ?? []).map((f) => `[file: ${f.name ?? f.id ?? 'attachment'}]`),
  unsupported: (message) =>
    message.author.isMe ? 'own message' : message.metadata.edited ? 'edited' : undefined,
};
