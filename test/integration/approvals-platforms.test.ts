import { createServer } from 'node:http';
import { EventSource } from 'eventsource';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { callbackQueryUpdate, type FakeTelegram, messageUpdate } from '../../src/fake-telegram/server.js';
import { GenericWebhookSender } from '../../src/shared/delivery/generic-sender.js';
import { SenderRegistry } from '../../src/shared/delivery/sender.js';
import { createSenders } from '../../src/shared/delivery/senders.js';
import { enqueueDelivery } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import { APPROVE_ACTION, DENY_ACTION } from '../../src/shared/platforms/approval-text.js';
import { waitReady } from '../../src/shared/redis.js';
import { listApprovals } from '../../src/shared/store/approvals.js';
import { standardSources } from '../../src/shared/webhooks/standard.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { type RefundWorker, refundWorker, toolParts } from '../helpers/approvals.js';
import { type TestDelivery, testDeliveryWorker } from '../helpers/delivery-worker.js';
import {
  type FakeSlack,
  SLACK_TEAM_ID,
  slackEventEnvelope,
  slackSignedHeaders,
  startFakeSlack,
} from '../helpers/fake-slack.js';
import { testIngress } from '../helpers/ingress.js';
import { type PlatformStack, platformStack } from '../helpers/platform-stack.js';
import { deleteLabel, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { startTelegramSide, type TelegramSide, telegramHeaders } from '../helpers/telegram.js';
import { signedHeaders, webhookSecret } from '../helpers/webhooks.js';

/**
 * Tool approval on chat platforms (docs/approvals.md, "Chat platforms"), through the real
 * Chat SDK adapters against local fakes of the platforms' APIs: the request is delivered as a
 * card with Approve and Deny buttons (a Telegram inline keyboard, Slack Block Kit buttons),
 * and a click, arriving as the platform's signed webhook, answers it; so does a "yes" reply.
 * Only the people the request was made for answer it. A signed generic webhook's receiver
 * gets `approval.requested`, and so does the chat's live stream.
 */

const LABEL = 'apprplat';
const redis = testRedis();

beforeAll(() => waitReady(redis));
afterAll(async () => {
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

type Keyboard = { inline_keyboard: Array<Array<{ text: string; callback_data: string }>> };

describe('on Telegram', () => {
  let tg: TelegramSide;
  let fake: FakeTelegram;
  let delivery: TestDelivery;
  let worker: RefundWorker;
  let close: () => Promise<void>;

  async function start() {
    const prefix = randomPrefix(LABEL);
    tg = await startTelegramSide(redis, prefix);
    fake = tg.fake;
    const senders = await createSenders(tg.config, silentLogger());
    delivery = testDeliveryWorker(redis, prefix, senders, { maxAttempts: 3, timeoutMs: 5000 });
    worker = refundWorker(redis, prefix);
    worker.deps.deliver = (chatKey) => enqueueDelivery(delivery.queue, chatKey);
    close = async () => {
      await delivery.close();
      await senders.close();
      await tg.close();
    };
  }
  afterEach(() => close());

  async function webhook(update: unknown) {
    const res = await tg.ing.app.inject({
      method: 'POST',
      url: '/webhooks/telegram',
      headers: telegramHeaders(),
      payload: JSON.stringify(update),
    });
    expect(res.statusCode).toBe(200);
  }

  /** "refund 42" from `from` in chat `chatId`, its turn, and the card Telegram got. */
  async function cardFor(chatId: number, from = { id: 42, username: 'alice', first_name: 'Alice' }) {
    await webhook(messageUpdate({ chatId, text: 'refund 42', from }));
    const chatKey = `telegram-chat-${chatId}`;
    expect((await runTurn(worker.deps, chatKey)).status).toBe('done');
    const card = await waitFor(async () => fake.sentTo(chatId).find((s) => s.replyMarkup), {
      what: 'the approval card',
    });
    return { chatKey, card, keyboard: card.replyMarkup as Keyboard };
  }

  it('sends the request as an inline keyboard, and a press of Approve answers it: the call runs, the card shows the answer', async () => {
    await start();
    const { chatKey, card, keyboard } = await cardFor(4201);
    expect(card.text).toContain('Approve refund?');
    expect(card.text).toContain('"order":"42"');
    const [approve, deny] = keyboard.inline_keyboard[0]!;
    expect([approve!.text, deny!.text]).toEqual(['Approve', 'Deny']);
    const [request] = await listApprovals(tg.store, chatKey);
    expect(JSON.parse(approve!.callback_data.slice('chat:'.length))).toEqual({
      a: APPROVE_ACTION,
      v: request!.request.id,
    });
    expect(JSON.parse(deny!.callback_data.slice('chat:'.length)).a).toBe(DENY_ACTION);

    await webhook(
      callbackQueryUpdate({ chatId: 4201, messageId: card.messageId!, data: approve!.callback_data }),
    );
    expect((await listApprovals(tg.store, chatKey))[0]).toMatchObject({
      state: 'answered',
      answer: { approved: true, by: 'telegram:42' },
    });
    expect(fake.answeredCallbacks).toHaveLength(1);
    // The buttons are gone: the card says how it was answered.
    const edited = fake.edits.find((e) => e.messageId === card.messageId)!;
    expect(edited.text).toContain('approved by');
    expect((edited.replyMarkup as Keyboard).inline_keyboard).toEqual([]);

    expect((await runTurn(worker.deps, chatKey)).status).toBe('done');
    expect(worker.runs).toEqual(['42']);
    await waitFor(async () => fake.sentTo(4201).some((s) => s.text.startsWith('refund: ')), {
      what: 'the reply after the call',
    });
  });

  it('answers nothing for a press by someone the request was not for, and takes the requester\'s "no" as the answer', async () => {
    await start();
    const { chatKey, card, keyboard } = await cardFor(-1004201);
    const approve = keyboard.inline_keyboard[0]![0]!;
    await webhook(
      callbackQueryUpdate({
        chatId: -1004201,
        messageId: card.messageId!,
        data: approve.callback_data,
        from: { id: 99, username: 'mallory', first_name: 'Mallory' },
      }),
    );
    expect((await listApprovals(tg.store, chatKey))[0]?.state).toBe('open');
    // Someone else's "yes" is a message like any other.
    await webhook(messageUpdate({ chatId: -1004201, text: 'yes', from: { id: 99, username: 'mallory' } }));
    expect((await tg.store.readAllPending(chatKey)).map((m) => m.parts)).toEqual([
      [{ type: 'text', text: 'yes' }],
    ]);
    await tg.store.redis.del(tg.store.keys(chatKey).inbox);
    // The requester's "no" answers it and is not a message.
    await webhook(messageUpdate({ chatId: -1004201, text: 'No', from: { id: 42, username: 'alice' } }));
    expect((await listApprovals(tg.store, chatKey))[0]).toMatchObject({
      state: 'answered',
      answer: { approved: false, by: 'telegram:42' },
    });
    expect((await runTurn(worker.deps, chatKey)).status).toBe('done');
    expect(worker.runs).toEqual([]);
    expect(toolParts(await tg.store.readHistory(chatKey), 'refund')).toEqual([
      expect.objectContaining({ state: 'output-denied' }),
    ]);
  });
});

describe('on Slack', () => {
  const SECRET = 'slack-signing-secret-for-tests';
  let fake: FakeSlack;
  let stack: PlatformStack;
  let worker: RefundWorker;

  afterEach(async () => {
    await stack.close();
    await fake.close();
  });

  function post(body: string, contentType = 'application/json') {
    return stack.app.inject({
      method: 'POST',
      url: '/webhooks/slack',
      headers: slackSignedHeaders(SECRET, body, { contentType }),
      payload: body,
    });
  }

  it('posts the request with Approve and Deny buttons, and a signed block_actions click answers it', async () => {
    const prefix = randomPrefix(LABEL);
    fake = await startFakeSlack();
    stack = await platformStack(
      redis,
      prefix,
      { SLACK_BOT_TOKEN: 'xoxb-test-token', SLACK_SIGNING_SECRET: SECRET, SLACK_API_URL: fake.apiUrl },
      { groupMode: 'all' },
    );
    worker = refundWorker(redis, prefix);
    worker.deps.deliver = (chatKey) => stack.deliver(chatKey);
    const event = slackEventEnvelope({ channel: 'C0APPR', text: 'refund 77', user: 'U0ALICE' });
    expect((await post(JSON.stringify(event))).statusCode).toBe(200);
    const [chatKey] = await waitFor(async () => {
      const keys = await stack.store.redis.keys(`${prefix}:{c:*}:inbox`);
      return keys.length > 0
        ? keys.map((k) => k.slice(`${prefix}:{c:`.length, -'}:inbox'.length))
        : undefined;
    });
    expect((await runTurn(worker.deps, chatKey!)).status).toBe('done');
    const post0 = await waitFor(async () => fake.posts().find((p) => p.body.blocks), { what: 'the card' });
    const blocks = (
      typeof post0.body.blocks === 'string' ? JSON.parse(post0.body.blocks) : post0.body.blocks
    ) as Array<{
      type: string;
      elements?: Array<{ type: string; action_id: string; value: string }>;
    }>;
    const buttons = blocks.find((b) => b.type === 'actions')!.elements!;
    expect(buttons.map((b) => b.action_id)).toEqual([APPROVE_ACTION, DENY_ACTION]);
    const [request] = await listApprovals(stack.store, chatKey!);
    expect(buttons[0]!.value).toBe(`${request!.request.id} ${chatKey}`);

    const click = {
      type: 'block_actions',
      team: { id: SLACK_TEAM_ID },
      user: { id: 'U0ALICE', username: 'alice', name: 'alice' },
      api_app_id: 'A0APP',
      trigger_id: 't1',
      channel: { id: 'C0APPR' },
      container: { type: 'message', message_ts: '1700000000.000100', channel_id: 'C0APPR' },
      message: { ts: '1700000000.000100', thread_ts: event.event && (event.event as { ts: string }).ts },
      actions: [{ type: 'button', action_id: DENY_ACTION, value: buttons[1]!.value, action_ts: '1' }],
    };
    const form = `payload=${encodeURIComponent(JSON.stringify(click))}`;
    const res = await post(form, 'application/x-www-form-urlencoded');
    expect(res.statusCode).toBe(200);
    expect((await listApprovals(stack.store, chatKey!))[0]).toMatchObject({
      state: 'answered',
      answer: { approved: false, by: 'slack:U0ALICE' },
    });
    expect((await runTurn(worker.deps, chatKey!)).status).toBe('done');
    expect(worker.runs).toEqual([]);
  });
});

describe('to a signed generic webhook and the live stream', () => {
  it('a receiver gets approval.requested, signed with the source secret; the live SSE stream carries the event and the card', async () => {
    const prefix = randomPrefix(LABEL);
    const secret = webhookSecret();
    const arrivals: Array<Record<string, unknown>> = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const payload = Buffer.concat(chunks).toString('utf8');
        try {
          arrivals.push(
            new Webhook(secret).verify(payload, req.headers as Record<string, string>) as Record<
              string,
              unknown
            >,
          );
          res.writeHead(200).end('ok');
        } catch {
          res.writeHead(401).end();
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hooks`;
    const policy = { allowHttp: true, hosts: ['127.0.0.1'] };
    const sources = standardSources([{ name: 'crm', secrets: [secret] }]);
    const ing = await testIngress(redis, prefix, { genericWebhooks: { sources, replyPolicy: policy } });
    const delivery = testDeliveryWorker(
      redis,
      prefix,
      new SenderRegistry([new GenericWebhookSender(sources, policy)]),
      {
        maxAttempts: 3,
        timeoutMs: 5000,
      },
    );
    const worker = refundWorker(redis, prefix);
    worker.deps.deliver = (chatKey) => enqueueDelivery(delivery.queue, chatKey);
    const base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
    const sse = new EventSource(`${base}/v1/chats/ticket-9/stream`);
    const seen: Array<{ type: string; data: Record<string, unknown> }> = [];
    for (const type of ['outbox', 'event'])
      sse.addEventListener(type, (e) =>
        seen.push({ type, data: JSON.parse(e.data) as Record<string, unknown> }),
      );
    try {
      const payload = JSON.stringify({ chatKey: 'ticket-9', text: 'refund 9', replyTo: { url } });
      const res = await ing.app.inject({
        method: 'POST',
        url: '/webhooks/generic/crm',
        headers: signedHeaders(secret, payload),
        payload,
      });
      expect(res.statusCode).toBe(202);
      expect((await runTurn(worker.deps, 'ticket-9')).status).toBe('done');
      const [request] = await listApprovals(ing.store, 'ticket-9');
      const approval = {
        id: request!.request.id,
        tool: 'refund',
        input: { order: '9' },
        expiresAt: request!.request.expiresAt,
      };
      const arrived = await waitFor(async () => arrivals.find((a) => a.type === 'approval.requested'), {
        what: 'the signed approval.requested',
      });
      expect(arrived).toMatchObject({ chatKey: 'ticket-9', approval });
      await waitFor(
        async () => seen.some((s) => s.type === 'event' && s.data.type === 'approval.requested'),
        {
          what: 'approval.requested on the live stream',
        },
      );
      expect(
        seen.find((s) => s.type === 'event' && s.data.type === 'approval.requested')?.data,
      ).toMatchObject({
        data: { approvalId: approval.id, tool: 'refund', input: { order: '9' } },
      });
      expect(seen.find((s) => s.type === 'outbox')?.data).toMatchObject({ approval });
    } finally {
      sse.close();
      await delivery.close();
      await ing.close();
      await new Promise((r) => server.close(r));
    }
  });
});
