import { createHmac, randomBytes } from 'node:crypto';
import { type FakePlatform, type RecordedCall, startFakePlatform } from './fake-platform.js';

/**
 * A local Slack Web API (`SLACK_API_URL=<url>/api/`) and Slack's side of the Events API:
 * v0 request signing and event envelopes. The adapter's own `@slack/web-api` client talks to
 * it; nothing here knows chatlane. Messages: chat.postMessage, chat.update, chat.delete, and
 * native streaming as Slack has it: chat.startStream (in a thread: `thread_ts` required),
 * chat.appendStream and chat.stopStream (a stopped stream refuses more with
 * `message_not_in_streaming_state`), each taking `markdown_text` or `chunks` of
 * `{ type: 'markdown_text', text }` (form-encoded as JSON by the client).
 */
export const SLACK_BOT_USER_ID = 'UBOTCHATLANE';
export const SLACK_TEAM_ID = 'T0TEAM';

export interface FakeSlack extends FakePlatform {
  /** What the adapter gets as `apiUrl`. */
  readonly apiUrl: string;
  /** chat.postMessage calls, oldest first. */
  posts(): RecordedCall[];
  /** What the message with this ts shows now (posts, edits and streams applied; undefined once deleted). */
  textNow(ts: string): string | undefined;
  /** Native streams, oldest first: their ts, thread, the text of each call, and whether stopped. */
  streams(): SlackStream[];
}

export interface SlackStream {
  ts: string;
  channel: string;
  threadTs: string;
  /** The text each startStream / appendStream / stopStream call added, in order. */
  pieces: Array<{ method: string; text: string; at: number }>;
  stopped: boolean;
}

/** A stream call's text: `markdown_text`, or its markdown chunks (a JSON string in a form body). */
function streamText(body: Record<string, unknown>): string {
  if (typeof body.markdown_text === 'string') return body.markdown_text;
  let chunks = body.chunks;
  if (typeof chunks === 'string') chunks = JSON.parse(chunks) as unknown;
  if (!Array.isArray(chunks)) return '';
  return chunks
    .filter(
      (c): c is { type: string; text: string } => c?.type === 'markdown_text' && typeof c.text === 'string',
    )
    .map((c) => c.text)
    .join('');
}

export async function startFakeSlack(): Promise<FakeSlack> {
  let seq = 0;
  const nextTs = () => {
    seq += 1;
    return `${Math.floor(Date.now() / 1000)}.${String(seq).padStart(6, '0')}`;
  };
  const texts = new Map<string, string>();
  const streams = new Map<string, SlackStream>();
  const fake = await startFakePlatform((call) => {
    const method = call.path.replace(/^\/api\//, '');
    const channel = call.body.channel;
    const ts = String(call.body.ts ?? '');
    switch (method) {
      case 'chat.startStream': {
        if (!call.body.thread_ts) return slackError('invalid_arguments');
        const stream: SlackStream = {
          ts: nextTs(),
          channel: String(channel),
          threadTs: String(call.body.thread_ts),
          pieces: [{ method, text: streamText(call.body), at: call.at }],
          stopped: false,
        };
        streams.set(stream.ts, stream);
        texts.set(stream.ts, stream.pieces[0]!.text);
        return { body: { ok: true, channel, ts: stream.ts } };
      }
      case 'chat.appendStream':
      case 'chat.stopStream': {
        const stream = streams.get(ts);
        if (!stream) return slackError('message_not_found');
        if (stream.stopped) return slackError('message_not_in_streaming_state');
        const text = streamText(call.body);
        stream.pieces.push({ method, text, at: call.at });
        texts.set(ts, `${texts.get(ts) ?? ''}${text}`);
        if (method === 'chat.stopStream') stream.stopped = true;
        return {
          body: {
            ok: true,
            channel,
            ts,
            ...(stream.stopped && { message: { ts, text: texts.get(ts), thread_ts: stream.threadTs } }),
          },
        };
      }
      case 'chat.update':
        if (!texts.has(ts)) return slackError('message_not_found');
        texts.set(ts, String(call.body.markdown_text ?? call.body.text ?? ''));
        return { body: { ok: true, channel, ts, text: texts.get(ts) } };
      case 'chat.delete':
        if (!texts.delete(ts)) return slackError('message_not_found');
        return { body: { ok: true, channel, ts } };
      case 'auth.test':
        return {
          body: {
            ok: true,
            user_id: SLACK_BOT_USER_ID,
            bot_id: 'BBOT',
            user: 'chatlane',
            team_id: SLACK_TEAM_ID,
          },
        };
      case 'chat.postMessage': {
        const posted = nextTs();
        texts.set(posted, String(call.body.markdown_text ?? call.body.text ?? ''));
        return { body: { ok: true, channel, ts: posted } };
      }
      case 'users.info': {
        const id = String(call.body.user ?? 'U0');
        return {
          body: {
            ok: true,
            user: { id, name: `user-${id.toLowerCase()}`, real_name: `User ${id}`, profile: {} },
          },
        };
      }
      default:
        return { body: { ok: true } };
    }
  });
  return Object.assign(fake, {
    apiUrl: `${fake.url}/api/`,
    posts: () => fake.callsTo('/api/chat.postMessage'),
    textNow: (ts: string) => texts.get(ts),
    streams: () => [...streams.values()],
  });
}

/** The `X-Slack-*` headers Slack puts on a request: `v0=` HMAC-SHA256 of `v0:<ts>:<body>`. */
export function slackSignedHeaders(
  signingSecret: string,
  body: string,
  opts: { timestamp?: number; retryNum?: number; contentType?: string } = {},
): Record<string, string> {
  const ts = String(opts.timestamp ?? Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac('sha256', signingSecret).update(`v0:${ts}:${body}`).digest('hex')}`;
  return {
    'content-type': opts.contentType ?? 'application/json',
    'x-slack-request-timestamp': ts,
    'x-slack-signature': signature,
    ...(opts.retryNum !== undefined && {
      'x-slack-retry-num': String(opts.retryNum),
      'x-slack-retry-reason': 'http_timeout',
    }),
  };
}

export interface SlackMessageInput {
  channel: string;
  user?: string;
  text: string;
  ts?: string;
  threadTs?: string;
  /** 'channel' | 'group' | 'im' | 'mpim' */
  channelType?: string;
  /** `app_mention` for the Events API's mention event (same message, own event id). */
  type?: 'message' | 'app_mention';
  subtype?: string;
  eventId?: string;
  /** Set on messages posted by an app (the bot's own replies carry its bot id). */
  botId?: string;
  files?: { id: string; name: string; mimetype: string }[];
}

let tsSeq = 0;
/** A fresh message ts in Slack's `seconds.micro` form. */
export function slackTs(): string {
  tsSeq += 1;
  return `${Math.floor(Date.now() / 1000)}.${String(tsSeq).padStart(6, '0')}`;
}

/** An `event_callback` envelope around one message event, as the Events API posts it. */
export function slackEventEnvelope(input: SlackMessageInput): Record<string, unknown> {
  const ts = input.ts ?? slackTs();
  return {
    token: 'legacy-verification-token',
    team_id: SLACK_TEAM_ID,
    api_app_id: 'A0APP',
    type: 'event_callback',
    event_id: input.eventId ?? `Ev${randomBytes(5).toString('hex').toUpperCase()}`,
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ team_id: SLACK_TEAM_ID, user_id: SLACK_BOT_USER_ID, is_bot: true }],
    event: {
      type: input.type ?? 'message',
      ...(input.subtype && { subtype: input.subtype }),
      ...(input.botId && { bot_id: input.botId }),
      ...(input.files && {
        files: input.files.map((f) => ({
          ...f,
          url_private: `https://files.slack.com/files-pri/${f.id}/${f.name}`,
        })),
      }),
      channel: input.channel,
      user: input.user ?? 'U0ALICE',
      text: input.text,
      ts,
      event_ts: ts,
      team: SLACK_TEAM_ID,
      channel_type: input.channelType ?? 'channel',
      ...(input.threadTs && { thread_ts: input.threadTs }),
    },
  };
}

/** A Slack error answer: HTTP 200 with `ok: false` (how the Web API reports most failures). */
export const slackError = (error: string) => ({ body: { ok: false, error } });

/** HTTP 429 with `Retry-After` (seconds), how the Web API rate-limits. */
export const slackRateLimited = (retryAfterSeconds: number) => ({
  status: 429,
  headers: { 'retry-after': String(retryAfterSeconds) },
  body: { ok: false, error: 'ratelimited' },
});
