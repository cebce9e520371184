import type { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SplitReply } from '../../src/shared/delivery/render/format.js';
import type { ReplyRoute } from '../../src/shared/delivery/route.js';
import {
  type Sender,
  SenderRegistry,
  type SendRequest,
  type SendResult,
  type SplitRequest,
} from '../../src/shared/delivery/sender.js';
import { createQueue, type DeliveryJob, QUEUES } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import { createMetrics, type Metrics } from '../../src/shared/metrics.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { type DeliveryDeps, type DeliverySettings, deliverChat } from '../../src/worker/delivery/deliver.js';
import { writeReplies } from '../helpers/delivery-worker.js';
import { userMessage } from '../helpers/messages.js';
import { sampleValue } from '../helpers/prom.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * An outbox item a platform needs several messages for is one item with a per-part cursor
 * (delivery-part.lua, deliver-item.ts): its parts go in order, each recorded before the next,
 * a retry resumes at the first part not recorded, and the chat's cursor moves past the item
 * once, after its last part.
 */
const redis = testRedis();
let prefix: string;
let store: ChatStore;
let dstore: DeliveryStore;
let queue: Queue<DeliveryJob>;
let metrics: Metrics;

const SETTINGS: DeliverySettings = {
  maxAttempts: 3,
  backoffMs: 50,
  backoffMaxMs: 200,
  timeoutMs: 1000,
  batch: 5,
  maxItemsPerJob: 100,
  maxJobMs: 10_000,
};
const ROUTE: ReplyRoute = { channel: 'parts', threadId: 'thread-1' };

/** A sender whose platform takes an item's `|`-separated pieces as messages; answers scripted per piece. */
class SplittingSender implements Sender {
  readonly channel = 'parts';
  readonly received: Array<{ itemId: string; text: string; index: number; attempt: number }> = [];
  readonly script = new Map<string, SendResult[]>();
  format = 'pipes.1';
  readonly splits: Array<string | undefined> = [];

  async split({ item, format }: SplitRequest): Promise<SplitReply> {
    this.splits.push(format);
    const pieces = item.text.split('|');
    return { format: this.format, parts: pieces.map((text) => ({ text, message: { raw: text } })) };
  }

  async send(request: SendRequest): Promise<SendResult> {
    const part = request.part!;
    this.received.push({
      itemId: request.item.id,
      text: part.reply.text,
      index: part.index,
      attempt: request.attempt,
    });
    return this.script.get(part.reply.text)?.shift() ?? { status: 'ok' };
  }

  texts(): string[] {
    return this.received.map((r) => r.text);
  }
}

function deps(sender: Sender): DeliveryDeps {
  return {
    store: dstore,
    senders: new SenderRegistry([sender]),
    settings: SETTINGS,
    workerId: 'test',
    logger: silentLogger(),
    metrics,
  };
}

async function routed(chatKey: string, texts: string[]): Promise<string[]> {
  const res = await store.ingest(
    chatKey,
    userMessage(chatKey, `in-${Math.random()}`, 'hi'),
    {
      maxPending: 100,
      dedupWindowMs: 60_000,
    },
    ROUTE,
  );
  expect(res.status).toBe('accepted');
  const lease = await store.acquire(chatKey, `turn-${chatKey}`, 60_000);
  if (!lease.ok) throw new Error('busy');
  return writeReplies(store, queue, chatKey, lease.fence, texts);
}

const events = async (chatKey: string, type: string) =>
  (await store.readEvents(chatKey, undefined, 100)).filter((e) => e.type === type).map((e) => e.data);

beforeAll(() => waitReady(redis));
beforeEach(() => {
  prefix = randomPrefix('dparts');
  store = new ChatStore(redis, { prefix, maxEvents: 100 });
  dstore = new DeliveryStore(redis, prefix, 100);
  queue = createQueue<DeliveryJob>(prefix, QUEUES.deliveries, redis);
  metrics = createMetrics({ defaultMetrics: false });
});
afterEach(async () => {
  await queue.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('an outbox item sent as several messages', () => {
  it('goes part by part, in order, then the next item; the cursor moves once per item and delivery.split says how many parts went', async () => {
    const sender = new SplittingSender();
    const ids = await routed('c1', ['a1|a2|a3', 'b1', 'c1|c2']);
    expect(await deliverChat(deps(sender), 'c1')).toMatchObject({ status: 'done', delivered: 3, failed: 0 });
    expect(sender.texts()).toEqual(['a1', 'a2', 'a3', 'b1', 'c1', 'c2']);
    expect(await dstore.state('c1')).toMatchObject({ deliveredTo: ids[2], part: undefined });
    expect(await events('c1', 'delivery.split')).toEqual([
      { itemId: ids[0], channel: 'parts', parts: 3, format: 'pipes.1' },
      { itemId: ids[2], channel: 'parts', parts: 2, format: 'pipes.1' },
    ]);
    // The outbox record says it too, durably: only the items that went out as several messages.
    const outbox = await store.readOutbox('c1', undefined, 10);
    expect(outbox.map((item) => [item.id, item.parts])).toEqual([
      [ids[0], 3],
      [ids[1], undefined],
      [ids[2], 2],
    ]);
    expect(outbox[1]).not.toHaveProperty('parts');
    expect(
      await sampleValue(await metrics.registry.metrics(), 'chatlane_deliveries_total', {
        channel: 'parts',
        result: 'delivered',
      }),
    ).toBe(3);
  });

  it('a refused part is retried from that part: the parts before it are not sent again', async () => {
    const sender = new SplittingSender();
    sender.script.set('a3', [{ status: 'retry', reason: 'HTTP 502' }]);
    const [a] = await routed('c1', ['a1|a2|a3|a4']);
    expect(await deliverChat(deps(sender), 'c1')).toMatchObject({ status: 'retry', attempt: 1 });
    // The record says two parts of the item went out, in the split's format.
    expect(await dstore.state('c1')).toMatchObject({
      deliveredTo: '0-0',
      part: { itemId: a, sent: 2, parts: 4, format: 'pipes.1' },
    });
    expect(await deliverChat(deps(sender), 'c1')).toMatchObject({ status: 'done', delivered: 1 });
    expect(sender.received.map((r) => [r.text, r.attempt])).toEqual([
      ['a1', 1],
      ['a2', 1],
      ['a3', 1],
      ['a3', 2],
      ['a4', 1],
    ]);
    // The resumed split was asked for the format the item began with.
    expect(sender.splits).toEqual([undefined, 'pipes.1']);
    expect(await dstore.state('c1')).toMatchObject({ deliveredTo: a, part: undefined });
  });

  it('each part has its own attempts; giving up on one skips the rest of the item and says so', async () => {
    const sender = new SplittingSender();
    sender.script.set('a1', [
      { status: 'retry', reason: '502' },
      { status: 'retry', reason: '502' },
    ]);
    sender.script.set('a2', [
      { status: 'retry', reason: '502' },
      { status: 'retry', reason: '502' },
    ]);
    sender.script.set('a3', [{ status: 'failed', reason: 'HTTP 400: refused' }]);
    const [a, b] = await routed('c1', ['a1|a2|a3|a4', 'b1']);
    for (let i = 0; i < 10; i++) {
      const outcome = await deliverChat(deps(sender), 'c1');
      if (outcome.status === 'done') break;
    }
    // Two refusals each for a1 and a2 (3 attempts allowed per part), a3 refused for good.
    expect(sender.texts()).toEqual(['a1', 'a1', 'a1', 'a2', 'a2', 'a2', 'a3', 'b1']);
    expect(await events('c1', 'delivery.failed')).toEqual([
      {
        itemId: a,
        channel: 'parts',
        attempts: 1,
        reason: 'permanent',
        error: 'HTTP 400: refused',
        part: 3,
        parts: 4,
        partsSent: 2,
      },
    ]);
    expect(await dstore.state('c1')).toMatchObject({ deliveredTo: b, part: undefined });
    // Given up part-way, it did not go out as its parts: the outbox record has no count for it.
    expect((await store.readOutbox('c1', undefined, 10)).map((item) => item.parts)).toEqual([
      undefined,
      undefined,
    ]);
    expect(await redis.exists(store.keys('c1').parts)).toBe(0);
  });

  it('a split that changed since the item began (another version) sends the item again from its first part', async () => {
    const sender = new SplittingSender();
    sender.script.set('a2', [{ status: 'retry', reason: '502' }]);
    await routed('c1', ['a1|a2|a3']);
    await deliverChat(deps(sender), 'c1');
    sender.format = 'pipes.2';
    await deliverChat(deps(sender), 'c1');
    expect(sender.texts()).toEqual(['a1', 'a2', 'a1', 'a2', 'a3']);
    // The record was reset to the new split's count at its first part.
    expect((await dstore.state('c1')).part).toBeUndefined();
  });
});

describe('the part cursor (delivery-part.lua)', () => {
  it('only the lease holder records a part, only from the count it read, only for the next item', async () => {
    const [a, b] = await routed('c1', ['a1|a2|a3', 'b1']);
    const claim = await dstore.claim('c1', 'live', 10_000, 10);
    expect(claim.status).toBe('ok');
    expect((claim as { part?: unknown }).part).toBeUndefined();
    const split = { parts: 3, format: 'pipes.1' };
    expect(
      await dstore.advancePart('c1', 'other', '0-0', a!, { ...split, sentBefore: 0, sent: 1 }, 10_000),
    ).toMatchObject({
      ok: false,
      reason: 'lost',
    });
    expect(
      await dstore.advancePart('c1', 'live', '0-0', a!, { ...split, sentBefore: 0, sent: 1 }, 10_000),
    ).toEqual({
      ok: true,
    });
    // The same step again (a stalled duplicate's): refused, the record says 1.
    expect(
      await dstore.advancePart('c1', 'live', '0-0', a!, { ...split, sentBefore: 0, sent: 1 }, 10_000),
    ).toMatchObject({
      ok: false,
      reason: 'moved',
    });
    // Not with the cursor anywhere else.
    expect(
      await dstore.advancePart('c1', 'live', b!, a!, { ...split, sentBefore: 1, sent: 2 }, 10_000),
    ).toMatchObject({
      ok: false,
      reason: 'moved',
    });
    expect(await dstore.claim('c1', 'live', 10_000, 10)).toMatchObject({
      status: 'ok',
      part: { itemId: a, sent: 1, parts: 3, format: 'pipes.1' },
    });
    // The item's last step checks the count too, then clears the record.
    const item = { id: a!, runId: 'r1' };
    expect(
      await dstore.advance('c1', 'live', '0-0', item, 10_000, undefined, { partsBefore: 2 }),
    ).toMatchObject({
      ok: false,
      reason: 'moved',
    });
    expect(await dstore.advance('c1', 'live', '0-0', item, 10_000, undefined, { partsBefore: 1 })).toEqual({
      ok: true,
    });
    expect(await dstore.state('c1')).toMatchObject({ deliveredTo: a, part: undefined });
  });
});
