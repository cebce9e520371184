import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveryId } from '../../src/shared/delivery/delivery-id.js';
import { hasExited, killInsideAcceptWindow } from '../helpers/delivery-crash.js';
import type { RoleProcess } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';
import { crmSourceEnv, signedHeaders, webhookSecret } from '../helpers/webhooks.js';

const SECRET = webhookSecret();

interface Arrival {
  webhookId: string;
  /** The outbox item id (orders the items of one chat). */
  itemId: string;
  text: string;
}

/**
 * The user's system: verifies each reply with the `standardwebhooks` package and records it.
 * `onNext` lets a test act on the next arrival before it is answered.
 */
class Receiver {
  readonly arrivals: Arrival[] = [];
  onNext: ((res: ServerResponse) => Promise<void>) | undefined;
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}/replies`;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const payload = Buffer.concat(chunks).toString('utf8');
    const body = new Webhook(SECRET).verify(payload, req.headers as Record<string, string>) as {
      text: string;
      itemId: string;
    };
    // Accepted: the receiver has stored it, whatever happens to the answer.
    this.arrivals.push({
      webhookId: String(req.headers['webhook-id']),
      itemId: body.itemId,
      text: body.text,
    });
    const act = this.onNext;
    this.onNext = undefined;
    if (act) await act(res);
    else res.writeHead(200).end('ok');
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

describe('a delivery process killed after the receiver accepted an item', () => {
  const receiver = new Receiver();
  const stack = useStack('e2e-dlv-crash', {
    roles: [],
    env: {
      // The turn workers only write the outbox; the delivery process is the one we kill.
      ...crmSourceEnv(SECRET),
      // Short lock, stall check and delivery lease (2 × 2 s + 1 s) so recovery is quick. Not
      // shorter: on a loaded host a send slower than the timeout is abandoned and sent again,
      // which is at-least-once working as designed but a third copy of the item in this test.
      DELIVERY_TIMEOUT_MS: '2000',
      JOB_LOCK_MS: '1500',
      STALLED_INTERVAL_MS: '1000',
    },
  });
  let ingress: RoleProcess;

  beforeAll(async () => {
    await receiver.start();
    ingress = await stack.start('ingress');
    await stack.start('worker');
  });
  afterAll(() => receiver.close());

  async function say(chatKey: string, text: string): Promise<void> {
    const payload = JSON.stringify({ chatKey, text, replyTo: { url: receiver.url } });
    const res = await fetch(`${ingress.url}/webhooks/generic/crm`, {
      method: 'POST',
      headers: signedHeaders(SECRET, payload),
      body: payload,
    });
    expect(res.status).toBe(202);
  }

  const outboxIds = async (chatKey: string) =>
    (await stack.store.readOutbox(chatKey, undefined, 100)).map((i) => i.id);

  async function killAfterAccept(chatKey: string, answer: boolean): Promise<void> {
    let delivery = await stack.start('delivery');
    await say(chatKey, 'one');
    await waitFor(async () => receiver.arrivals.length === 1, { what: 'the first reply' });

    // The next reply: the receiver stores it, freezes the delivery process so it cannot
    // record the acceptance, answers (or not), and kills it.
    const doomed = delivery;
    receiver.onNext = (res) =>
      killInsideAcceptWindow(
        doomed,
        res,
        answer ? () => new Promise<void>((r) => res.writeHead(200).end('ok', () => r())) : undefined,
      );
    await say(chatKey, 'two');
    await waitFor(hasExited(doomed), { what: 'the delivery process killed' });
    // A third reply is written while nobody delivers.
    await say(chatKey, 'three');
    await waitFor(async () => (await outboxIds(chatKey)).length === 3, {
      what: 'three replies in the outbox',
    });
    expect(receiver.arrivals.map((a) => a.text)).toEqual(['echo: one', 'echo: two']);

    delivery = await stack.start('delivery');
    const ids = await outboxIds(chatKey);
    await waitFor(async () => receiver.arrivals.at(-1)?.itemId === ids[2], {
      timeoutMs: 30_000,
      what: 'the third reply after the restart',
    });
    // The frozen item came again, with the same id, before the next one; nothing else repeats.
    expect(receiver.arrivals.map((a) => a.itemId)).toEqual([ids[0], ids[1], ids[1], ids[2]]);
    const hooks = ids.map((id) => deliveryId(chatKey, id));
    expect(receiver.arrivals.map((a) => a.webhookId)).toEqual([hooks[0], hooks[1], hooks[1], hooks[2]]);
    await delivery.kill('SIGTERM');
    receiver.arrivals.length = 0;
  }

  it('whose answer was sent but never read: the item arrives twice with the same id, in order', async () => {
    await killAfterAccept('crash-answered', true);
  }, 60_000);

  it('killed before it could answer: the same', async () => {
    await killAfterAccept('crash-unanswered', false);
  }, 60_000);
});
