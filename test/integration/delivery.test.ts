import type { Queue, Worker } from 'bullmq';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ReplyRoute } from '../../src/shared/delivery/route.js';
import {
  type Sender,
  SenderRegistry,
  type SendRequest,
  type SendResult,
} from '../../src/shared/delivery/sender.js';
import { createQueue, type DeliveryJob, QUEUES } from '../../src/shared/jobs.js';
import { type Logger, silentLogger } from '../../src/shared/logger.js';
import { createMetrics, type Metrics } from '../../src/shared/metrics.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { type DeliveryDeps, type DeliverySettings, deliverChat } from '../../src/worker/delivery/deliver.js';
import { createDeliveryWorker } from '../../src/worker/delivery/delivery-worker.js';
import { writeReplies } from '../helpers/delivery-worker.js';
import { userMessage } from '../helpers/messages.js';
import { sampleValue } from '../helpers/prom.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

const redis = testRedis();
let prefix: string;
let store: ChatStore;
let dstore: DeliveryStore;
let queue: Queue<DeliveryJob>;
let metrics: Metrics;
const workers: Worker[] = [];

const SETTINGS: DeliverySettings = {
  maxAttempts: 4,
  backoffMs: 50,
  backoffMaxMs: 200,
  timeoutMs: 1000,
  batch: 3,
  maxItemsPerJob: 100,
  maxJobMs: 10_000,
};

/** What a receiver saw: every send, in order, with the time it arrived. */
interface Received {
  chatKey: string;
  itemId: string;
  text: string;
  attempt: number;
  at: number;
}

/**
 * A sender whose answers the test scripts per item text (default ok). It is a real
 * implementation of the interface the platform and webhook senders implement.
 */
class ScriptedSender implements Sender {
  readonly received: Received[] = [];
  /** text → answers, consumed one per attempt; when empty the answer is ok. */
  readonly script = new Map<string, Array<SendResult | (() => Promise<SendResult>)>>();
  constructor(readonly channel = 'test') {}
  async send(req: SendRequest): Promise<SendResult> {
    this.received.push({
      chatKey: req.chatKey,
      itemId: req.item.id,
      text: req.item.text,
      attempt: req.attempt,
      at: Date.now(),
    });
    const next = this.script.get(req.item.text)?.shift();
    if (next === undefined) return { status: 'ok' };
    return typeof next === 'function' ? next() : next;
  }
  textsFor(chatKey: string): string[] {
    return this.received.filter((r) => r.chatKey === chatKey).map((r) => r.text);
  }
}

const ROUTE: ReplyRoute = { channel: 'test', threadId: 'thread-1' };

async function routeChat(chatKey: string, route: ReplyRoute = ROUTE, id = `in-${Math.random()}`) {
  const res = await store.ingest(
    chatKey,
    userMessage(chatKey, id, 'hi'),
    { maxPending: 100, dedupWindowMs: 60_000 },
    route,
  );
  expect(res.status).toBe('accepted');
}

async function fenceOf(chatKey: string): Promise<string> {
  const lease = await store.acquire(chatKey, `turn-${chatKey}`, 60_000);
  if (!lease.ok) throw new Error('busy');
  return lease.fence;
}

async function writeItems(chatKey: string, texts: string[]): Promise<string[]> {
  return writeReplies(store, queue, chatKey, await fenceOf(chatKey), texts);
}

function deps(
  senders: SenderRegistry,
  settings: Partial<DeliverySettings> = {},
  logger: Logger = silentLogger(),
): DeliveryDeps {
  return {
    store: dstore,
    senders,
    settings: { ...SETTINGS, ...settings },
    workerId: 'test',
    logger,
    metrics,
  };
}

function startWorker(
  senders: SenderRegistry,
  settings: Partial<DeliverySettings> = {},
  concurrency = 4,
  logger?: Logger,
) {
  const worker = createDeliveryWorker(deps(senders, settings, logger), {
    prefix,
    connection: redis,
    concurrency,
    lockDurationMs: 5000,
    stalledIntervalMs: 5000,
    deliveries: queue,
  });
  workers.push(worker);
  void worker.run();
  return worker;
}

const cursorOf = async (chatKey: string) => (await dstore.state(chatKey)).deliveredTo;
const eventsOf = async (chatKey: string, type: string) =>
  (await store.readEvents(chatKey, undefined, 100)).filter((e) => e.type === type);
const metric = async (name: string, labels: Record<string, string>) =>
  sampleValue(await metrics.registry.metrics(), name, labels) ?? 0;

beforeAll(() => waitReady(redis));
beforeEach(() => {
  prefix = randomPrefix('dlv');
  store = new ChatStore(redis, { prefix, maxEvents: 100 });
  dstore = new DeliveryStore(redis, prefix, 100);
  queue = createQueue<DeliveryJob>(prefix, QUEUES.deliveries, redis);
  metrics = createMetrics({ defaultMetrics: false });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.close(true)));
  await queue.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('delivery through the deliveries queue', () => {
  it('delivers a chat’s outbox in order and moves the cursor to the last item', async () => {
    const sender = new ScriptedSender();
    startWorker(new SenderRegistry([sender]));
    await routeChat('c1');
    const ids = await writeItems('c1', ['one', 'two', 'three', 'four', 'five', 'six', 'seven']);
    await waitFor(async () => (await cursorOf('c1')) === ids.at(-1), { what: 'all delivered' });
    expect(sender.textsFor('c1')).toEqual(['one', 'two', 'three', 'four', 'five', 'six', 'seven']);
    expect(sender.received.map((r) => r.itemId)).toEqual(ids);
    expect(sender.received.every((r) => r.attempt === 1)).toBe(true);
    expect(await metric('chatlane_deliveries_total', { channel: 'test', result: 'delivered' })).toBe(7);
  });

  it('moves the cursor only after the sender accepted the item', async () => {
    const sender = new ScriptedSender();
    let accept!: () => void;
    const accepted = new Promise<SendResult>((resolve) => {
      accept = () => resolve({ status: 'ok' });
    });
    sender.script.set('held', [() => accepted]);
    await routeChat('c1');
    const [held, after] = await writeItems('c1', ['held', 'after']);
    const running = deliverChat(deps(new SenderRegistry([sender])), 'c1');
    await waitFor(async () => sender.received.length === 1, { what: 'the first send' });
    // The receiver has the item but has not answered: the cursor has not moved.
    expect(await cursorOf('c1')).toBe('0-0');
    accept();
    expect(await running).toMatchObject({ status: 'done', delivered: 2, failed: 0 });
    expect(sender.received.map((r) => r.itemId)).toEqual([held, after]);
    expect(await cursorOf('c1')).toBe(after);
  });

  it('retries a refused item with backoff, then delivers it and the rest in order', async () => {
    const sender = new ScriptedSender();
    sender.script.set('two', [
      { status: 'retry', reason: 'HTTP 502' },
      { status: 'retry', reason: 'HTTP 503' },
    ]);
    startWorker(new SenderRegistry([sender]));
    await routeChat('c1');
    const ids = await writeItems('c1', ['one', 'two', 'three']);
    await waitFor(async () => (await cursorOf('c1')) === ids[2], { what: 'delivered after retries' });
    expect(sender.received.map((r) => [r.text, r.attempt])).toEqual([
      ['one', 1],
      ['two', 1],
      ['two', 2],
      ['two', 3],
      ['three', 1],
    ]);
    const twos = sender.received.filter((r) => r.text === 'two');
    // Backoff 50 ms then 100 ms (±20 %), never a busy loop.
    expect(twos[1]!.at - twos[0]!.at).toBeGreaterThanOrEqual(35);
    expect(twos[2]!.at - twos[1]!.at).toBeGreaterThanOrEqual(75);
    expect(await metric('chatlane_deliveries_total', { channel: 'test', result: 'retry' })).toBe(2);
    expect(await eventsOf('c1', 'delivery.failed')).toEqual([]);
  });

  it('waits the receiver’s retry-after instead of the backoff', async () => {
    const sender = new ScriptedSender();
    sender.script.set('limited', [{ status: 'retry', reason: 'HTTP 429', afterMs: 800 }]);
    startWorker(new SenderRegistry([sender]));
    await routeChat('c1');
    const [id] = await writeItems('c1', ['limited']);
    await waitFor(async () => (await cursorOf('c1')) === id, { what: 'delivered after retry-after' });
    const [first, second] = sender.received;
    expect(second!.attempt).toBe(2);
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(800);
  });

  it('skips an item that failed for good, records delivery.failed and counts it, and goes on', async () => {
    const sender = new ScriptedSender();
    sender.script.set('blocked', [{ status: 'failed', reason: 'HTTP 403 bot was blocked by the user' }]);
    startWorker(new SenderRegistry([sender]));
    await routeChat('c1');
    const [, blocked, last] = await writeItems('c1', ['before', 'blocked', 'after']);
    await waitFor(async () => (await cursorOf('c1')) === last, { what: 'delivery past the failure' });
    expect(sender.textsFor('c1')).toEqual(['before', 'blocked', 'after']);
    const failed = await eventsOf('c1', 'delivery.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.data).toMatchObject({
      itemId: blocked,
      channel: 'test',
      attempts: 1,
      reason: 'permanent',
      error: 'HTTP 403 bot was blocked by the user',
    });
    expect(await metric('chatlane_delivery_failures_total', { channel: 'test' })).toBe(1);
  });

  it('gives an item up after DELIVERY_MAX_ATTEMPTS retries', async () => {
    const sender = new ScriptedSender();
    const down: SendResult = { status: 'retry', reason: 'connection refused' };
    sender.script.set('doomed', [down, down, down, down, down]);
    startWorker(new SenderRegistry([sender]), { maxAttempts: 3, backoffMs: 20, backoffMaxMs: 40 });
    await routeChat('c1');
    const [doomed, next] = await writeItems('c1', ['doomed', 'next']);
    await waitFor(async () => (await cursorOf('c1')) === next, { what: 'delivery past the exhausted item' });
    expect(sender.received.map((r) => [r.text, r.attempt])).toEqual([
      ['doomed', 1],
      ['doomed', 2],
      ['doomed', 3],
      ['next', 1],
    ]);
    const [event] = await eventsOf('c1', 'delivery.failed');
    expect(event!.data).toMatchObject({ itemId: doomed, attempts: 3, reason: 'attempts-exhausted' });
  });

  it('writes one warn line per failed attempt (chat, item, attempt, reason) and none for a delivered item', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const sender = new ScriptedSender();
    const down: SendResult = { status: 'retry', reason: 'connection refused' };
    sender.script.set('doomed', [down, down, down]);
    startWorker(new SenderRegistry([sender]), { maxAttempts: 3, backoffMs: 20, backoffMaxMs: 40 }, 4, logger);
    await routeChat('c1');
    const [doomed, next] = await writeItems('c1', ['doomed', 'next']);
    await waitFor(async () => (await cursorOf('c1')) === next, { what: 'delivery past the exhausted item' });
    const warned = lines.filter((l) => l.level === 40);
    expect(warned.map((l) => [l.msg, l.attempt])).toEqual([
      ['delivery will be retried', 1],
      ['delivery will be retried', 2],
      ['delivery failed; item skipped', 3],
    ]);
    for (const line of warned)
      expect(line).toMatchObject({
        chatKey: 'c1',
        itemId: doomed,
        channel: 'test',
        reason: expect.any(String),
      });
  });

  it('a chat whose receiver keeps failing does not hold a worker slot: other chats are delivered', async () => {
    const sender = new ScriptedSender();
    const down: SendResult = { status: 'retry', reason: 'HTTP 500' };
    sender.script.set(
      'stuck',
      Array.from({ length: 50 }, () => down),
    );
    // One slot for the whole worker and a long backoff: if the failing chat kept its slot
    // (a sleep in the processor), nothing else could be delivered for a minute.
    startWorker(
      new SenderRegistry([sender]),
      { backoffMs: 60_000, backoffMaxMs: 60_000, maxAttempts: 50 },
      1,
    );
    await routeChat('stuck-chat');
    await writeItems('stuck-chat', ['stuck', 'behind']);
    await waitFor(async () => sender.received.length >= 1, { what: 'the failing send' });
    const others = ['o1', 'o2', 'o3'];
    const last: Record<string, string> = {};
    for (const c of others) {
      await routeChat(c);
      last[c] = (await writeItems(c, [`${c}-a`, `${c}-b`])).at(-1)!;
    }
    await waitFor(
      async () => {
        for (const c of others) if ((await cursorOf(c)) !== last[c]) return false;
        return true;
      },
      { timeoutMs: 10_000, what: 'the other chats delivered' },
    );
    for (const c of others) expect(sender.textsFor(c)).toEqual([`${c}-a`, `${c}-b`]);
    // The failing chat's item is still waiting, and its successor was never sent before it.
    expect(sender.textsFor('stuck-chat')).toEqual(['stuck']);
    expect(await cursorOf('stuck-chat')).toBe('0-0');
    const [job] = await queue.getJobs(['delayed']);
    expect(job?.data).toEqual({ chatKey: 'stuck-chat' });
  });

  it('a chat without a reply route gets no delivery job and no delivery', async () => {
    const sender = new ScriptedSender();
    const ids = await writeItems('api-only', ['read over the API']);
    expect(ids).toHaveLength(1);
    expect(await queue.getJobCounts('waiting', 'delayed', 'active')).toEqual({
      waiting: 0,
      delayed: 0,
      active: 0,
    });
    expect(await deliverChat(deps(new SenderRegistry([sender])), 'api-only')).toEqual({
      status: 'idle',
      reason: 'no-route',
    });
    expect(sender.received).toEqual([]);
  });

  it('a chat that gains a route later starts delivering after what its outbox already held', async () => {
    const sender = new ScriptedSender();
    await writeItems('late', ['old reply, read over the API']);
    await routeChat('late');
    const [fresh] = await writeItems('late', ['new reply']);
    const outcome = await deliverChat(deps(new SenderRegistry([sender])), 'late');
    expect(outcome).toMatchObject({ status: 'done', delivered: 1 });
    expect(sender.textsFor('late')).toEqual(['new reply']);
    expect(await cursorOf('late')).toBe(fresh);
  });

  it('keeps the cursor when the route changes and follows the new route for later items', async () => {
    const sender = new ScriptedSender();
    const routes: Array<string | undefined> = [];
    const recording: Sender = {
      channel: 'test',
      send: async (req) => {
        routes.push(req.route.threadId);
        return sender.send(req);
      },
    };
    await routeChat('c1', { channel: 'test', threadId: 'a' });
    await writeItems('c1', ['first']);
    await deliverChat(deps(new SenderRegistry([recording])), 'c1');
    const cursor = await cursorOf('c1');
    await routeChat('c1', { channel: 'test', threadId: 'b' });
    expect(await cursorOf('c1')).toBe(cursor);
    await writeItems('c1', ['second']);
    await deliverChat(deps(new SenderRegistry([recording])), 'c1');
    expect(routes).toEqual(['a', 'b']);
  });

  it('an item for a channel this process has no sender for is retried, then given up on', async () => {
    await routeChat('c1', { channel: 'nowhere' });
    const [id] = await writeItems('c1', ['lost in transit']);
    const registry = new SenderRegistry();
    for (let i = 1; i < 3; i++) {
      const outcome = await deliverChat(deps(registry, { maxAttempts: 3 }), 'c1');
      expect(outcome).toMatchObject({ status: 'retry', attempt: i });
    }
    expect(await deliverChat(deps(registry, { maxAttempts: 3 }), 'c1')).toMatchObject({
      status: 'done',
      failed: 1,
    });
    expect(await cursorOf('c1')).toBe(id);
    const [event] = await eventsOf('c1', 'delivery.failed');
    expect(event!.data).toMatchObject({ channel: 'nowhere', reason: 'attempts-exhausted' });
    expect(String(event!.data.error)).toContain("no sender for channel 'nowhere'");
  });

  it('a send that never answers is cut off at the timeout and retried', async () => {
    const sender = new ScriptedSender();
    sender.script.set('hangs', [() => new Promise<SendResult>(() => undefined)]);
    await routeChat('c1');
    await writeItems('c1', ['hangs']);
    const outcome = await deliverChat(deps(new SenderRegistry([sender]), { timeoutMs: 200 }), 'c1');
    expect(outcome).toMatchObject({ status: 'retry', attempt: 1, reason: 'no answer within 200ms' });
  });
});

describe('the delivery cursor and lease', () => {
  it('a second job cannot claim the chat while the lease is live', async () => {
    await routeChat('c1');
    await writeItems('c1', ['x']);
    const a = await dstore.claim('c1', 'owner-a', 10_000, 10);
    expect(a.status).toBe('ok');
    const b = await dstore.claim('c1', 'owner-b', 10_000, 10);
    expect(b.status).toBe('busy');
  });

  it('a stalled holder can neither move the cursor after losing its lease nor move it backwards', async () => {
    await routeChat('c1');
    const [one, two] = await writeItems('c1', ['one', 'two']);
    const stalled = await dstore.claim('c1', 'stalled', 50, 10);
    expect(stalled.status).toBe('ok');
    await new Promise((r) => setTimeout(r, 80));
    // The lease ran out: the next job takes over and delivers both items.
    const live = await dstore.claim('c1', 'live', 10_000, 10);
    expect(live.status).toBe('ok');
    const item = (id: string | undefined) => ({ id: id!, runId: 'r1' });
    expect((await dstore.advance('c1', 'live', '0-0', item(one), 10_000)).ok).toBe(true);
    expect((await dstore.advance('c1', 'live', one!, item(two), 10_000)).ok).toBe(true);
    // The stalled holder wakes up and tries to record item one as delivered.
    expect(await dstore.advance('c1', 'stalled', '0-0', item(one), 10_000)).toMatchObject({
      ok: false,
      reason: 'lost',
    });
    expect(await cursorOf('c1')).toBe(two);
    // Even the lease holder cannot write with a stale expectation (compare-and-set).
    expect(await dstore.advance('c1', 'live', one!, item(two), 10_000)).toMatchObject({
      ok: false,
      reason: 'moved',
      detail: two,
    });
    expect(await cursorOf('c1')).toBe(two);
  });

  it('an unchanged route is not rewritten and does not reset the cursor', async () => {
    await routeChat('c1');
    const [id] = await writeItems('c1', ['x']);
    await deliverChat(deps(new SenderRegistry([new ScriptedSender()])), 'c1');
    await routeChat('c1');
    expect(await dstore.state('c1')).toEqual({ route: ROUTE, deliveredTo: id });
  });
});
