import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { z } from 'zod';
import { type OutgoingMessage, type SendOutcome, sendOutcomeOf, type Transport } from './api.js';
import type { HttpClient } from './http.js';

/**
 * The signed generic webhook, both ways: messages go in as Standard Webhooks POSTs to
 * `/webhooks/generic/<source>` (webhook-id = the message id, so a retry is a redelivery the
 * ingress answers `duplicate`), and replies come back to a receiver this process runs, which
 * verifies each one and records when every outbox item arrived and how often.
 */

export class WebhookTransport implements Transport {
  readonly name = 'generic-webhook';
  private readonly hook: Webhook;

  constructor(
    private readonly http: HttpClient,
    private readonly source: string,
    secret: string,
    private readonly replyUrl: string,
  ) {
    this.hook = new Webhook(secret);
  }

  async send(message: OutgoingMessage): Promise<SendOutcome> {
    const body = JSON.stringify({
      chatKey: message.chatKey,
      text: message.text,
      user: { id: `${message.chatKey}-user`, name: 'loadtest' },
      replyTo: { url: this.replyUrl },
    });
    const at = new Date();
    const res = await this.http.requestRaw(
      'POST',
      `/webhooks/generic/${encodeURIComponent(this.source)}`,
      body,
      {
        'content-type': 'application/json',
        'webhook-id': message.id,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': this.hook.sign(message.id, at, body),
      },
    );
    return sendOutcomeOf(res);
  }
}

const replySchema = z.looseObject({
  type: z.literal('chat.reply'),
  chatKey: z.string(),
  id: z.string(),
  itemId: z.string(),
  text: z.string(),
  ts: z.number(),
});

export interface Delivery {
  chatKey: string;
  /** The outbox item id (the body's `itemId`), as the outbox API lists it. */
  id: string;
  /** First arrival, ms on the run's clock. */
  at: number;
  count: number;
}

const MAX_BODY = 1024 * 1024;

function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        req.destroy();
        resolve(undefined);
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve(undefined));
  });
}

/**
 * Where the deployment delivers replies: accepts only correctly signed `chat.reply` bodies
 * (401 otherwise, which the sender treats as permanent — a misconfigured secret shows at once)
 * and answers 204. Keeps one record per outbox item: first arrival and count, keyed by the
 * delivered id (`webhook-id`, unique across chats, the same on a redelivery).
 */
export class ReplyReceiver {
  /** By delivered id (`webhook-id`). */
  readonly deliveries = new Map<string, Delivery>();
  rejected = 0;
  private server: Server | undefined;
  private readonly hook: Webhook;

  constructor(
    secret: string,
    private readonly now: () => number,
    private readonly onDelivery: (d: Delivery) => void,
  ) {
    this.hook = new Webhook(secret);
  }

  async listen(host: string, port: number): Promise<string> {
    const server = createServer((req, res) => {
      void (async () => {
        const raw = await readBody(req);
        const reply = raw ? this.accept(raw, req.headers) : undefined;
        if (!reply) {
          this.rejected++;
          res.writeHead(401).end();
          return;
        }
        res.writeHead(204).end();
      })();
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    const address = server.address() as AddressInfo;
    const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${shown}:${address.port}/`;
  }

  private accept(raw: Buffer, headers: IncomingMessage['headers']): Delivery | undefined {
    const header = (name: string) => {
      const v = headers[name];
      return Array.isArray(v) ? v[0] : v;
    };
    let parsed: unknown;
    try {
      parsed = this.hook.verify(raw.toString('utf8'), {
        'webhook-id': header('webhook-id') ?? '',
        'webhook-timestamp': header('webhook-timestamp') ?? '',
        'webhook-signature': header('webhook-signature') ?? '',
      });
    } catch {
      return undefined;
    }
    const reply = replySchema.safeParse(parsed);
    if (!reply.success || reply.data.id !== header('webhook-id')) return undefined;
    const key = reply.data.id;
    let d = this.deliveries.get(key);
    if (d) d.count++;
    else {
      d = { chatKey: reply.data.chatKey, id: reply.data.itemId, at: this.now(), count: 1 };
      this.deliveries.set(key, d);
    }
    this.onDelivery(d);
    return d;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}
