import { generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { type FakePlatform, type RecordedCall, startFakePlatform } from './fake-platform.js';

/**
 * A local Discord REST API (`DISCORD_API_URL=<url>/api/v10`) and Discord's side of the
 * interactions endpoint: Ed25519 signatures over `timestamp + body`, and gateway events in
 * the forwarded form the adapter's Gateway listener posts (`x-discord-gateway-token`).
 */
export const DISCORD_APPLICATION_ID = '1100000000000000001';
/** Discord's limit on a message's content; a longer one is refused (50035 Invalid Form Body). */
export const DISCORD_CONTENT_LIMIT = 2000;

const tooLong = {
  status: 400,
  body: {
    message: 'Invalid Form Body',
    code: 50035,
    errors: {
      content: {
        _errors: [
          { code: 'BASE_TYPE_MAX_LENGTH', message: `Must be ${DISCORD_CONTENT_LIMIT} or fewer in length.` },
        ],
      },
    },
  },
};

export interface FakeDiscord extends FakePlatform {
  readonly apiUrl: string;
  /** POST /channels/:id/messages calls. */
  posts(): RecordedCall[];
  /** PATCH /channels/:id/messages/:id calls (edits), oldest first. */
  edits(): RecordedCall[];
  /** What a posted message shows now, its edits applied. */
  contentNow(messageId: string): string | undefined;
}

export async function startFakeDiscord(): Promise<FakeDiscord> {
  let seq = 0;
  const snowflake = () => {
    seq += 1;
    return `13${String(Date.now()).slice(-10)}${String(seq).padStart(5, '0')}`;
  };
  /** Threads opened through the fake: thread id → parent channel. */
  const threads = new Map<string, string>();
  /** Posted message id → its content now. */
  const contents = new Map<string, string>();
  const fake = await startFakePlatform((call) => {
    const long = String(call.body.content ?? '').length > DISCORD_CONTENT_LIMIT;
    const post = /^\/api\/v10\/channels\/(\d+)\/messages$/.exec(call.path);
    if (call.method === 'POST' && post) {
      if (long) return tooLong;
      const id = snowflake();
      contents.set(id, String(call.body.content ?? ''));
      return {
        body: {
          id,
          channel_id: post[1],
          content: call.body.content,
          author: { id: DISCORD_APPLICATION_ID, username: 'chatlane', bot: true },
          timestamp: new Date().toISOString(),
        },
      };
    }
    const edit = /^\/api\/v10\/channels\/(\d+)\/messages\/(\d+)$/.exec(call.path);
    if (call.method === 'PATCH' && edit) {
      if (!contents.has(edit[2]!)) return { status: 404, body: { message: 'Unknown Message', code: 10008 } };
      if (long) return tooLong;
      contents.set(edit[2]!, String(call.body.content ?? ''));
      return {
        body: {
          id: edit[2],
          channel_id: edit[1],
          content: call.body.content,
          author: { id: DISCORD_APPLICATION_ID, username: 'chatlane', bot: true },
          timestamp: new Date().toISOString(),
          edited_timestamp: new Date().toISOString(),
        },
      };
    }
    const thread = /^\/api\/v10\/channels\/(\d+)\/messages\/(\d+)\/threads$/.exec(call.path);
    if (call.method === 'POST' && thread) {
      threads.set(thread[2]!, thread[1]!);
      return { body: { id: thread[2], parent_id: thread[1], type: 11, name: call.body.name } };
    }
    const channel = /^\/api\/v10\/channels\/(\d+)$/.exec(call.path);
    if (call.method === 'GET' && channel) {
      const parent = threads.get(channel[1]!);
      return { body: parent ? { id: channel[1], type: 11, parent_id: parent } : { id: channel[1], type: 0 } };
    }
    if (/\/typing$/.test(call.path)) return { status: 204 };
    return { status: 404, body: { message: 'Unknown', code: 0 } };
  });
  return Object.assign(fake, {
    apiUrl: `${fake.url}/api/v10`,
    posts: () => fake.callsTo(/^\/api\/v10\/channels\/\d+\/messages$/).filter((c) => c.method === 'POST'),
    edits: () =>
      fake.callsTo(/^\/api\/v10\/channels\/\d+\/messages\/\d+$/).filter((c) => c.method === 'PATCH'),
    contentNow: (messageId: string) => contents.get(messageId),
  });
}

/** An application's Ed25519 key pair: the public key as the hex Discord shows in its portal. */
export function discordKeys(): { publicKeyHex: string; privateKey: KeyObject } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const der = publicKey.export({ format: 'der', type: 'spki' });
  return { publicKeyHex: der.subarray(der.length - 32).toString('hex'), privateKey };
}

/** `X-Signature-Ed25519` / `X-Signature-Timestamp` for an interaction body. */
export function discordSignedHeaders(privateKey: KeyObject, body: string): Record<string, string> {
  const timestamp = String(Math.floor(Date.now() / 1000));
  return {
    'content-type': 'application/json',
    'x-signature-timestamp': timestamp,
    'x-signature-ed25519': sign(null, Buffer.from(timestamp + body), privateKey).toString('hex'),
  };
}

export interface DiscordMessageInput {
  channelId: string;
  guildId?: string;
  content: string;
  authorId?: string;
  id?: string;
  mentionsBot?: boolean;
}

/** A MESSAGE_CREATE gateway event as the adapter's listener forwards it. */
export function discordForwardedMessage(input: DiscordMessageInput): Record<string, unknown> {
  const id = input.id ?? `12${randomBytes(7).readUIntBE(0, 6)}`;
  return {
    type: 'GATEWAY_MESSAGE_CREATE',
    timestamp: Date.now(),
    data: {
      id,
      channel_id: input.channelId,
      ...(input.guildId && { guild_id: input.guildId }),
      channel_type: input.guildId ? 0 : 1,
      content: input.content,
      author: { id: input.authorId ?? '1200000000000000001', username: 'alice', global_name: 'Alice' },
      mentions: input.mentionsBot ? [{ id: DISCORD_APPLICATION_ID, username: 'chatlane', bot: true }] : [],
      mention_roles: [],
      attachments: [],
      timestamp: new Date().toISOString(),
    },
  };
}
