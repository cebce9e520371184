import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Queue } from 'bullmq';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { guardedLookup, isPublicAddress } from '../../src/shared/address-policy.js';
import { deliveryId } from '../../src/shared/delivery/delivery-id.js';
import { GenericWebhookSender, retryAfterMs } from '../../src/shared/delivery/generic-sender.js';
import { SenderRegistry } from '../../src/shared/delivery/sender.js';
import { type DeliveryJob, enqueueDelivery } from '../../src/shared/jobs.js';
import { chatKeys } from '../../src/shared/keys.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { standardSources } from '../../src/shared/webhooks/standard.js';
import { replyAsTurn, type TestDelivery, testDeliveryWorker } from '../helpers/delivery-worker.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { signedHeaders, webhookSecret } from '../helpers/webhooks.js';

const NEW = webhookSecret();
const OLD = webhookSecret();

const redis = testRedis();
let prefix: string;
let ing: TestIngress;
let store: ChatStore;
let queue: Queue<DeliveryJob>;
let delivery: TestDelivery;
let receiver: Receiver;

const SOURCES = [{ name: 'crm', secrets: [NEW, OLD] }];
const POLICY = { allowHttp: true, hosts: ['127.0.0.1'] };

interface Arrival {
  webhookId: string;
  body: { type: string; chatKey: string; id: string; itemId: string; text: string; ts: number };
  /** Which receiver secret verified it. */
  verifiedWith: 'new' | 'old';
  status: number;
}

/**
 * A local replyTo.url receiver that verifies every request with the `standardwebhooks`
 * package, as a user's system would, and answers with scripted statuses (default 200).
 */
class Receiver {
  readonly arrivals: Arrival[] = [];
  readonly rejected: string[] = [];
  readonly statuses: Array<number | [number, Record<string, string>]> = [];
  private server!: Server;
  url = '';
  /** The receiver knows only this secret (a rotation seen from its side). */
  knows: 'new' | 'old' | 'both' = 'both';

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}/hooks/chatlane`;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const payload = Buffer.concat(chunks).toString('utf8');
    const headers = req.headers as Record<string, string>;
    let verifiedWith: 'new' | 'old' | undefined;
    for (const [name, s] of [
      ['new', NEW],
      ['old', OLD],
    ] as const) {
      if (this.knows !== 'both' && this.knows !== name) continue;
      try {
        new Webhook(s).verify(payload, headers);
        verifiedWith = name;
        break;
      } catch {
        // try the next secret
      }
    }
    if (!verifiedWith) {
      this.rejected.push(payload);
      res.writeHead(401).end();
      return;
    }
    const next = this.statuses.shift() ?? 200;
    const [status, extra] = Array.isArray(next) ? next : [next, {}];
    this.arrivals.push({
      webhookId: headers['webhook-id']!,
      body: JSON.parse(payload),
      verifiedWith,
      status,
    });
    res.writeHead(status, extra).end(status < 300 ? 'ok' : 'no');
  }

  accepted(): Arrival[] {
    return this.arrivals.filter((a) => a.status < 300);
  }

  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** A chat that came in through the signed webhook with replyTo.url = the receiver. */
async function chatFromWebhook(chatKey: string): Promise<void> {
  const payload = JSON.stringify({ chatKey, text: 'hello', replyTo: { url: receiver.url } });
  const res = await ing.app.inject({
    method: 'POST',
    url: '/webhooks/generic/crm',
    headers: signedHeaders(NEW, payload),
    payload,
  });
  expect(res.statusCode).toBe(202);
}

const reply = (chatKey: string, texts: string[]) => replyAsTurn(store, queue, chatKey, texts);

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('gdl');
  receiver = new Receiver();
  await receiver.start();
  ing = await testIngress(redis, prefix, {
    genericWebhooks: { sources: standardSources(SOURCES), replyPolicy: POLICY },
  });
  store = new ChatStore(redis, { prefix, maxEvents: 100 });
  delivery = testDeliveryWorker(
    redis,
    prefix,
    new SenderRegistry([new GenericWebhookSender(standardSources(SOURCES), POLICY)]),
  );
  queue = delivery.queue;
});
afterEach(async () => {
  await delivery.close();
  await ing.close();
  await receiver.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('replies to a generic webhook’s replyTo.url', () => {
  it('are POSTed signed with the source’s secret; webhook-id = the body’s id, derived from chat and item', async () => {
    await chatFromWebhook('ticket-1');
    const ids = await reply('ticket-1', ['first answer', 'second answer']);
    await waitFor(async () => receiver.accepted().length === 2, { what: 'two replies' });
    expect(receiver.rejected).toEqual([]);
    expect(receiver.arrivals.map((a) => a.webhookId)).toEqual(ids.map((id) => deliveryId('ticket-1', id)));
    expect(receiver.arrivals.map((a) => a.body.id)).toEqual(receiver.arrivals.map((a) => a.webhookId));
    expect(receiver.arrivals[0]!.webhookId).toMatch(/^msg_[A-Za-z0-9_-]{22}$/);
    expect(receiver.arrivals[0]!.body).toEqual({
      type: 'chat.reply',
      chatKey: 'ticket-1',
      id: deliveryId('ticket-1', ids[0]!),
      itemId: ids[0],
      text: 'first answer',
      ts: expect.any(Number),
    });
  });

  it('two chats whose outbox items share a stream id get different webhook-ids; a redelivery keeps its own', async () => {
    await chatFromWebhook('ticket-a');
    await chatFromWebhook('ticket-b');
    // Two chats answered in the same millisecond: both outbox streams hold `<ms>-0`.
    const shared = '1700000000000-0';
    for (const chatKey of ['ticket-a', 'ticket-b']) {
      const text = `answer in ${chatKey}`;
      await redis.xadd(chatKeys(prefix, chatKey).outbox, shared, 'runId', 'r1', 'text', text, 'ts', '1');
    }
    receiver.statuses.push(500);
    await enqueueDelivery(queue, 'ticket-a');
    await waitFor(async () => receiver.accepted().length === 1, { what: 'ticket-a after its retry' });
    await enqueueDelivery(queue, 'ticket-b');
    await waitFor(async () => receiver.accepted().length === 2, { what: 'ticket-b' });

    const seen = receiver.arrivals.map((a) => [a.body.chatKey, a.body.itemId, a.webhookId, a.status]);
    const [idA, idB] = [deliveryId('ticket-a', shared), deliveryId('ticket-b', shared)];
    expect(idA).not.toBe(idB);
    expect(seen).toEqual([
      ['ticket-a', shared, idA, 500],
      ['ticket-a', shared, idA, 200],
      ['ticket-b', shared, idB, 200],
    ]);
    // A receiver deduping on webhook-id keeps both chats' replies and drops only the redelivery.
    expect(new Set(receiver.arrivals.map((a) => a.webhookId)).size).toBe(2);
  });

  it('a message another chat sent (chat_contact_send) arrives with from = that chat', async () => {
    await chatFromWebhook('ticket-c');
    // As contact-receive.lua writes it into the target chat's outbox.
    const outbox = chatKeys(prefix, 'ticket-c').outbox;
    const itemId = await redis.xadd(outbox, '*', 'runId', 'r9', 'text', 'from ops', 'ts', '1', 'from', 'ops');
    await enqueueDelivery(queue, 'ticket-c');
    await waitFor(async () => receiver.accepted().length === 1, { what: 'the contact send' });
    expect(receiver.arrivals[0]!.body).toMatchObject({
      chatKey: 'ticket-c',
      itemId,
      text: 'from ops',
      from: 'ops',
    });
  });

  it('verify for a receiver that knows only the old secret while the rotation is under way', async () => {
    receiver.knows = 'old';
    await chatFromWebhook('ticket-1');
    await reply('ticket-1', ['answer']);
    await waitFor(async () => receiver.accepted().length === 1, { what: 'the reply' });
    expect(receiver.arrivals[0]!.verifiedWith).toBe('old');
  });

  it('a receiver answering 500 then 200 gets the item twice, with the same webhook-id, then the rest in order', async () => {
    receiver.statuses.push(500);
    await chatFromWebhook('ticket-1');
    const [first, second] = (await reply('ticket-1', ['one', 'two'])).map((id) => deliveryId('ticket-1', id));
    await waitFor(async () => receiver.accepted().length === 2, { what: 'both delivered' });
    expect(receiver.arrivals.map((a) => [a.webhookId, a.status])).toEqual([
      [first, 500],
      [first, 200],
      [second, 200],
    ]);
  });

  it('honours Retry-After on a 429', async () => {
    receiver.statuses.push([429, { 'retry-after': '1' }]);
    await chatFromWebhook('ticket-1');
    await reply('ticket-1', ['limited']);
    const started = Date.now();
    await waitFor(async () => receiver.accepted().length === 1, { what: 'delivered after Retry-After' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  });

  it('gives up at once on 410 Gone: the item is skipped and recorded, the next one delivered', async () => {
    receiver.statuses.push(410);
    await chatFromWebhook('ticket-1');
    const [gone, next] = await reply('ticket-1', ['gone', 'next']);
    await waitFor(async () => receiver.accepted().length === 1, { what: 'the next item' });
    expect(receiver.arrivals.map((a) => a.body.itemId)).toEqual([gone, next]);
    const failed = (await store.readEvents('ticket-1', undefined, 50)).filter(
      (e) => e.type === 'delivery.failed',
    );
    expect(failed.map((e) => e.data)).toEqual([
      expect.objectContaining({
        itemId: gone,
        channel: 'generic',
        reason: 'permanent',
        error: expect.stringContaining('410'),
      }),
    ]);
  });
});

describe('reply URL guard', () => {
  it('knows loopback, private, link-local and mapped addresses from public ones', () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '::1',
      'fd00::1',
      'fe80::1',
      '::ffff:10.0.0.1',
      '0.0.0.0',
    ]) {
      expect(isPublicAddress(a), a).toBe(false);
    }
    for (const a of ['93.184.216.34', '1.1.1.1', '2606:4700:4700::1111'])
      expect(isPublicAddress(a), a).toBe(true);
  });

  it('refuses a host name that resolves to a private address, on the address the socket would use', async () => {
    const err = await new Promise<NodeJS.ErrnoException | null>((resolve) =>
      guardedLookup('localhost', {}, (e) => resolve(e)),
    );
    expect(err?.code).toBe('EPRIVATEADDRESS');
  });

  it('a sender without the host on its allowlist refuses to POST to a private address and fails the item', async () => {
    const sender = new GenericWebhookSender(standardSources(SOURCES), { allowHttp: true, hosts: [] });
    const result = await sender.send({
      chatKey: 'c',
      route: { channel: 'generic', source: 'crm', url: receiver.url },
      item: { id: '1-0', text: 'x', ts: 1, runId: 'r' },
      attempt: 1,
      signal: AbortSignal.timeout(2000),
    });
    expect(result).toEqual({
      status: 'failed',
      reason: 'reply URL refused: 127.0.0.1 is not a public address (loopback)',
    });
    expect(receiver.arrivals).toEqual([]);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(retryAfterMs('3', 0)).toBe(3000);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4000)).toBe(6000);
    expect(retryAfterMs('soon')).toBeUndefined();
    expect(retryAfterMs(undefined)).toBeUndefined();
  });
});
