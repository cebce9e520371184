import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import {
  type FakeSlack,
  SLACK_BOT_USER_ID,
  slackError,
  slackEventEnvelope,
  slackRateLimited,
  slackSignedHeaders,
  slackTs,
  startFakeSlack,
} from '../helpers/fake-slack.js';
import { type PlatformStack, platformStack } from '../helpers/platform-stack.js';
import { deletePrefix, keySizes, keysUnder, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/**
 * Slack end to end through `@chat-adapter/slack`: Events API requests signed with the v0
 * scheme arrive at POST /webhooks/slack, are ingested once into the thread's chat, and
 * replies go out through the adapter's own Web API client to a local fake of
 * chat.postMessage (SLACK_API_URL).
 */
const SECRET = 'slack-signing-secret-for-tests';
const redis = testRedis();
let prefix: string;
let fake: FakeSlack;
let stack: PlatformStack;

async function start(opts: Parameters<typeof platformStack>[3] = {}): Promise<void> {
  stack = await platformStack(
    redis,
    prefix,
    { SLACK_BOT_TOKEN: 'xoxb-test-token', SLACK_SIGNING_SECRET: SECRET, SLACK_API_URL: fake.apiUrl },
    opts,
  );
}

function post(body: unknown, headers?: Record<string, string>) {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  return stack.app.inject({
    method: 'POST',
    url: '/webhooks/slack',
    headers: headers ?? slackSignedHeaders(SECRET, payload),
    payload,
  });
}

const pending = (chatKey: string) => stack.store.readAllPending(chatKey);

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('slack');
  fake = await startFakeSlack();
});
afterEach(async () => {
  await stack?.close();
  await fake.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('Slack webhook verification', () => {
  beforeEach(() => start({ delivery: false }));

  it('answers a bad signature 401 INVALID_SIGNATURE and writes nothing', async () => {
    const before = await keysUnder(redis, prefix);
    const payload = JSON.stringify(slackEventEnvelope({ channel: 'D0DM', channelType: 'im', text: 'hi' }));
    const forged = slackSignedHeaders('not-the-secret', payload);
    const res = await post(payload, forged);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: { code: 'INVALID_SIGNATURE' } });
    const unsigned = await post(payload, { 'content-type': 'application/json' });
    expect(unsigned.statusCode).toBe(401);
    const stale = await post(
      payload,
      slackSignedHeaders(SECRET, payload, { timestamp: Math.floor(Date.now() / 1000) - 600 }),
    );
    expect(stale.statusCode).toBe(401);
    expect(await keysUnder(redis, prefix)).toEqual(before);
  });

  it('answers a signed body that is not JSON 400 INVALID_JSON and writes nothing', async () => {
    const before = await keysUnder(redis, prefix);
    const res = await post('{"type": "event_callback", ');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'INVALID_JSON' } });
    expect(await keysUnder(redis, prefix)).toEqual(before);
  });

  it('answers the url_verification challenge', async () => {
    const res = await post({ type: 'url_verification', challenge: 'c-123', token: 'x' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ challenge: 'c-123' });
  });

  it('answers 404 PLATFORM_NOT_ENABLED for a platform that is not configured', async () => {
    const res = await stack.app.inject({ method: 'POST', url: '/webhooks/whatsapp', payload: '{}' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: { code: 'PLATFORM_NOT_ENABLED' } });
  });
});

describe('Slack messages into chats', () => {
  it('ingests a DM into slack-<channel>: with the platform metadata', async () => {
    await start({ delivery: false });
    const ts = slackTs();
    const res = await post(slackEventEnvelope({ channel: 'D0DM', channelType: 'im', text: 'hello bot', ts }));
    expect(res.statusCode).toBe(200);
    const [message] = await pending('slack-D0DM:');
    expect(message?.parts).toEqual([{ type: 'text', text: 'hello bot' }]);
    expect(message?.metadata).toMatchObject({
      channel: 'slack',
      chatId: 'D0DM',
      threadId: 'slack:D0DM:',
      userId: 'U0ALICE',
      messageId: ts,
      extra: { chatType: 'im', teamId: 'T0TEAM' },
    });
    expect(await stack.store.readMeta('slack-D0DM:')).toMatchObject({
      route: JSON.stringify({ channel: 'slack', threadId: 'slack:D0DM:' }),
    });
  });

  it('keeps a shared file as a note and its id, not as a file part (Slack files need the bot token)', async () => {
    await start({ delivery: false });
    const file = { id: 'F0REPORT', name: 'report.pdf', mimetype: 'application/pdf' };
    const res = await post(
      slackEventEnvelope({
        channel: 'D0DM',
        channelType: 'im',
        text: 'see attached',
        files: [file],
        subtype: 'file_share',
      }),
    );
    expect(res.statusCode).toBe(200);
    const [message] = await pending('slack-D0DM:');
    expect(message?.parts).toEqual([{ type: 'text', text: 'see attached\n[file: report.pdf]' }]);
    expect(message?.metadata.extra).toMatchObject({
      files: [{ fileId: 'F0REPORT', name: 'report.pdf', mediaType: 'application/pdf' }],
    });
  });

  it('GROUP_MODE=mentions: a channel message is ingested only when it mentions the bot', async () => {
    await start({ delivery: false });
    const plain = slackTs();
    const mention = slackTs();
    expect((await post(slackEventEnvelope({ channel: 'C0GEN', text: 'lunch?', ts: plain }))).statusCode).toBe(
      200,
    );
    expect(
      (
        await post(
          slackEventEnvelope({ channel: 'C0GEN', text: `<@${SLACK_BOT_USER_ID}> what is 2+2?`, ts: mention }),
        )
      ).statusCode,
    ).toBe(200);
    expect(await stack.store.chatExists(`slack-C0GEN:${plain}`)).toBe(false);
    const [message] = await pending(`slack-C0GEN:${mention}`);
    expect(message?.metadata).toMatchObject({
      chatId: 'C0GEN',
      threadId: `slack:C0GEN:${mention}`,
      messageId: mention,
    });
  });

  it('stores a message once when Slack sends it as both message and app_mention events', async () => {
    await start({ delivery: false });
    const ts = slackTs();
    const text = `<@${SLACK_BOT_USER_ID}> hi`;
    expect((await post(slackEventEnvelope({ channel: 'C0GEN', text, ts }))).statusCode).toBe(200);
    expect(
      (await post(slackEventEnvelope({ channel: 'C0GEN', text, ts, type: 'app_mention' }))).statusCode,
    ).toBe(200);
    expect(await pending(`slack-C0GEN:${ts}`)).toHaveLength(1);
  });

  it('GROUP_MODE=all: every channel message is ingested; a thread reply joins its thread’s chat', async () => {
    await start({ delivery: false, groupMode: 'all' });
    const top = slackTs();
    const replyTs = slackTs();
    expect((await post(slackEventEnvelope({ channel: 'C0GEN', text: 'question', ts: top }))).statusCode).toBe(
      200,
    );
    expect(
      (await post(slackEventEnvelope({ channel: 'C0GEN', text: 'follow-up', ts: replyTs, threadTs: top })))
        .statusCode,
    ).toBe(200);
    const messages = await pending(`slack-C0GEN:${top}`);
    expect(messages.map((m) => m.parts)).toEqual([
      [{ type: 'text', text: 'question' }],
      [{ type: 'text', text: 'follow-up' }],
    ]);
    expect(messages[1]?.metadata).toMatchObject({ messageId: replyTs, extra: { threadTs: top } });
  });

  it('a redelivered event (X-Slack-Retry-Num) answers 200 and writes nothing new', async () => {
    await start({ delivery: false });
    const body = JSON.stringify(slackEventEnvelope({ channel: 'D0DM', channelType: 'im', text: 'once' }));
    expect((await post(body)).statusCode).toBe(200);
    const before = await keysUnder(redis, prefix);
    const sizes = () => keySizes(redis, before);
    const counts = await sizes();
    for (const retryNum of [1, 2]) {
      const res = await post(body, slackSignedHeaders(SECRET, body, { retryNum }));
      expect(res.statusCode).toBe(200);
    }
    // The same event again without the retry header (the adapter's marker gone): chatlane's
    // own ingest still recognises the message id.
    expect((await post(body)).statusCode).toBe(200);
    expect(await keysUnder(redis, prefix)).toEqual(before);
    expect(await sizes()).toEqual(counts);
    expect(await pending('slack-D0DM:')).toHaveLength(1);
  });

  it('GROUP_MODE=all: the bot’s own replies coming back as message events are not stored (no reply loop)', async () => {
    await start({ delivery: false, groupMode: 'all' });
    const top = slackTs();
    const own = slackTs();
    await post(slackEventEnvelope({ channel: 'C0GEN', text: 'question', ts: top }));
    const echo = slackEventEnvelope({
      channel: 'C0GEN',
      user: SLACK_BOT_USER_ID,
      botId: 'BBOT',
      text: 'the answer',
      ts: own,
      threadTs: top,
    });
    expect((await post(echo)).statusCode).toBe(200);
    expect((await pending(`slack-C0GEN:${top}`)).map((m) => m.parts)).toEqual([
      [{ type: 'text', text: 'question' }],
    ]);
  });

  it('an event chatlane does not store (a channel join) answers 200 and stores nothing', async () => {
    await start({ delivery: false });
    const ts = slackTs();
    const res = await post(
      slackEventEnvelope({ channel: 'C0GEN', text: 'joined', ts, subtype: 'channel_join' }),
    );
    expect(res.statusCode).toBe(200);
    expect(await stack.store.chatExists(`slack-C0GEN:${ts}`)).toBe(false);
  });
});

describe('replies delivered to Slack', () => {
  it('arrive at chat.postMessage with the channel and the thread_ts of the chat', async () => {
    await start();
    const top = slackTs();
    await post(slackEventEnvelope({ channel: 'C0GEN', text: `<@${SLACK_BOT_USER_ID}> hi`, ts: top }));
    await post(slackEventEnvelope({ channel: 'D0DM', channelType: 'im', text: 'dm' }));
    await stack.reply(`slack-C0GEN:${top}`, ['first', 'second']);
    await stack.reply('slack-D0DM:', ['to the dm']);
    await waitFor(async () => fake.posts().length === 3, { what: 'three posts' });
    const byChannel = (c: string) => fake.posts().filter((p) => p.body.channel === c);
    expect(byChannel('C0GEN').map((p) => [p.body.thread_ts, p.body.markdown_text ?? p.body.text])).toEqual([
      [top, 'first'],
      [top, 'second'],
    ]);
    const [dm] = byChannel('D0DM');
    expect(dm?.body.thread_ts).toBeUndefined();
    expect(dm?.headers.authorization).toBe('Bearer xoxb-test-token');
  });

  it('a 429 waits Slack’s Retry-After before the item is sent again', async () => {
    await start();
    const ts = slackTs();
    await post(slackEventEnvelope({ channel: 'D0DM', channelType: 'im', text: 'hi', ts }));
    fake.scriptNext('/api/chat.postMessage', slackRateLimited(1));
    await stack.reply('slack-D0DM:', ['after the limit']);
    await waitFor(async () => fake.posts().length === 2, { what: 'the retried post' });
    const [limited, retried] = fake.posts();
    expect(retried!.at - limited!.at).toBeGreaterThanOrEqual(950);
  });

  it('channel_not_found is recorded as delivery.failed and the chat’s next item still goes out', async () => {
    await start();
    await post(slackEventEnvelope({ channel: 'D0DM', channelType: 'im', text: 'hi' }));
    fake.scriptNext('/api/chat.postMessage', slackError('channel_not_found'));
    const [gone, next] = await stack.reply('slack-D0DM:', ['lost', 'next']);
    await waitFor(async () => fake.posts().length === 2, { what: 'the next item' });
    expect(fake.posts()[1]!.body).toMatchObject({ channel: 'D0DM' });
    expect(await stack.failedDeliveries('slack-D0DM:')).toEqual([
      expect.objectContaining({
        itemId: gone,
        channel: 'slack',
        error: expect.stringContaining('channel_not_found'),
      }),
    ]);
    expect(next).toBeDefined();
    const counted = (await stack.metrics.deliveryFailures.get()).values.find(
      (v) => v.labels.channel === 'slack',
    );
    expect(counted?.value).toBe(1);
  });

  it('not_in_channel fails one chat’s item while another chat keeps receiving', async () => {
    await start();
    const a = slackTs();
    const b = slackTs();
    await post(slackEventEnvelope({ channel: 'C0GONE', text: `<@${SLACK_BOT_USER_ID}> a`, ts: a }));
    await post(slackEventEnvelope({ channel: 'C0OK', text: `<@${SLACK_BOT_USER_ID}> b`, ts: b }));
    fake.scriptNext('/api/chat.postMessage', slackError('not_in_channel'));
    await stack.reply(`slack-C0GONE:${a}`, ['blocked']);
    await waitFor(async () => fake.posts().length === 1, { what: 'the refused post' });
    await stack.reply(`slack-C0OK:${b}`, ['fine']);
    await waitFor(async () => fake.posts().some((p) => p.body.channel === 'C0OK'), {
      what: 'the other chat',
    });
    expect(await stack.failedDeliveries(`slack-C0GONE:${a}`)).toEqual([
      expect.objectContaining({ channel: 'slack', error: expect.stringContaining('not_in_channel') }),
    ]);
  });
});
