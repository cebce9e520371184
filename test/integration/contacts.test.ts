import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import type { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createQueue, type DeliveryJob, enqueueDelivery, QUEUES } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import { waitReady } from '../../src/shared/redis.js';
import { ContactBook } from '../../src/shared/store/contacts.js';
import { scripts } from '../../src/shared/store/scripts.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { sweepChat } from '../../src/worker/upkeep/sweeper.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';
import { type Script, scriptedModel } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';

const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;
let book: ContactBook;
let deliveries: Queue<DeliveryJob>;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('ctc');
  ing = await testIngress(redis, prefix);
  book = new ContactBook(ing.store, { retentionMs: 30 * 24 * 3600 * 1000, dedupWindowMs: 60_000 });
  deliveries = createQueue<DeliveryJob>(prefix, QUEUES.deliveries, redis);
});
afterEach(async () => {
  await ing.close();
  await deliveries.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

async function say(chatKey: string, username: string, extra: Record<string, string> = {}) {
  const res = await ing.app.inject({
    method: 'POST',
    url: `/v1/chats/${chatKey}/messages`,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ text: 'hi', metadata: { username, ...extra } }),
  });
  expect(res.statusCode).toBe(202);
}

const list = async (query = '') =>
  (await ing.app.inject({ method: 'GET', url: `/v1/contacts${query}` })).json().contacts as Array<
    Record<string, unknown>
  >;

describe('the contact book', () => {
  it('is upserted by every ingested message with a username', async () => {
    const before = Date.now();
    await say('telegram-chat-1', 'Alice', { userId: 'u-1', channel: 'telegram', chatId: '1' });
    const [alice] = await list();
    expect(alice).toMatchObject({
      username: 'Alice',
      chatKey: 'telegram-chat-1',
      channel: 'telegram',
      chatId: '1',
      userId: 'u-1',
    });
    expect(alice!.lastSeen).toBeGreaterThanOrEqual(before);
  });

  it('keeps one entry per chat a name was seen in, most recent first', async () => {
    await say('group-1', 'Alice');
    await say('dm-alice', 'Alice');
    expect((await list('?query=alice')).map((c) => c.chatKey).sort()).toEqual(['dm-alice', 'group-1']);
  });

  it('is searched by part of the name, ignoring case and a leading @', async () => {
    await say('c1', 'Alice');
    await say('c2', 'alina_k');
    await say('c3', 'Bob');
    const names = async (q: string) =>
      (await list(`?query=${encodeURIComponent(q)}`)).map((c) => c.username).sort();
    expect(await names('ALI')).toEqual(['Alice', 'alina_k']);
    expect(await names('@bob')).toEqual(['Bob']);
    expect(await names('nobody')).toEqual([]);
    expect((await list('?limit=2')).length).toBe(2);
  });

  it('skips messages without a username and writes no contact keys for them', async () => {
    await ing.app.inject({
      method: 'POST',
      url: '/v1/chats/anon/messages',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ text: 'hi' }),
    });
    expect(
      (await keysUnder(redis, prefix)).filter((k) => k.includes('contact') || k.includes('{ct:')),
    ).toEqual([]);
  });

  it('refuses a bad query with 400 VALIDATION_FAILED', async () => {
    for (const q of ['?limit=0', '?limit=1000', '?bogus=1']) {
      const res = await ing.app.inject({ method: 'GET', url: `/v1/contacts${q}` });
      expect(res.statusCode, q).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
  });
});

/** Two sweeps of `chatKey`: the second must find nothing left to finish. */
async function sweepTwice(chatKey: string): Promise<void> {
  const deps = {
    store: ing.store,
    turns: ing.turns,
    deliveries,
    contacts: book,
    batch: 100,
    logger: silentLogger(),
  };
  await sweepChat(deps, chatKey);
  await sweepChat(deps, chatKey);
}

/** One turn of `chatKey` whose model calls chat_contact_send once with `input`, then stops. */
async function contactTurn(
  chatKey: string,
  input: Record<string, unknown>,
  opts: { enabled?: boolean } = {},
) {
  const seenTools: string[][] = [];
  const script: Script = (prompt, _call, options: LanguageModelV4CallOptions) => {
    seenTools.push((options.tools ?? []).map((t) => t.name));
    if (prompt.at(-1)?.role === 'tool') return { text: '' };
    return { toolCalls: [{ name: 'chat_contact_send', input }] };
  };
  const model = scriptedModel(script);
  const deps = {
    ...turnDeps(redis, prefix, model.model),
    deliver: (c: string) => enqueueDelivery(deliveries, c),
    ...(opts.enabled !== false && { contacts: book }),
  };
  await say(chatKey, 'Operator');
  const outcome = await runTurn(deps, chatKey).catch((err: unknown) => ({ status: 'threw' as const, err }));
  const history = await ing.store.readHistory(chatKey);
  const toolPart = history
    .filter((m) => m.role === 'assistant')
    .flatMap((m) => m.parts)
    .find((p) => p.type === 'tool-chat_contact_send') as
    | { state?: string; errorText?: string; output?: unknown }
    | undefined;
  return { outcome, seenTools, toolPart, model, deps };
}

describe('chat_contact_send', () => {
  it('to a known name lands in that person’s chat outbox, with an event on both chats', async () => {
    await say('telegram-chat-42', 'Bob', { channel: 'telegram', chatId: '42' });
    const { outcome, toolPart } = await contactTurn('ops', { username: '@bob', text: 'Your order shipped.' });
    expect(outcome.status).toBe('done');
    expect(toolPart).toMatchObject({
      state: 'output-available',
      output: { status: 'sent', to: { username: 'Bob', chatKey: 'telegram-chat-42' } },
    });
    const [item] = await ing.store.readOutbox('telegram-chat-42', undefined, 10);
    expect(item).toMatchObject({ text: 'Your order shipped.', from: 'ops' });
    const sent = (await ing.store.readEvents('ops', undefined, 50)).find((e) => e.type === 'contact.sent');
    const received = (await ing.store.readEvents('telegram-chat-42', undefined, 50)).find(
      (e) => e.type === 'contact.received',
    );
    expect(sent?.data).toMatchObject({ to: 'telegram-chat-42', username: 'Bob' });
    expect(received?.data).toMatchObject({ from: 'ops', itemId: item!.id, sendId: sent?.data.sendId });
    // Nothing is left half done, and the sender's own outbox is untouched.
    expect(await redis.xlen(ing.store.keys('ops').relay)).toBe(0);
    expect(await ing.store.readOutbox('ops', undefined, 10)).toEqual([]);
  });

  it('triggers the delivery of the other chat when it has a reply route', async () => {
    await ing.store.ingest(
      'routed',
      {
        id: 'r1',
        role: 'user',
        parts: [{ type: 'text', text: 'hi' }],
        metadata: { ts: Date.now(), chatKey: 'routed', kind: 'normal', username: 'Carol' },
      },
      { maxPending: 10, dedupWindowMs: 60_000 },
      { channel: 'telegram', threadId: 't' },
    );
    await book.upsert({ username: 'Carol', chatKey: 'routed', lastSeen: Date.now() });
    const { toolPart } = await contactTurn('ops', { username: 'carol', text: 'hello' });
    expect(toolPart?.output).toMatchObject({ status: 'sent', delivered: 'queued' });
    expect((await deliveries.getJobs(['waiting'])).map((j) => j.data)).toEqual([{ chatKey: 'routed' }]);
  });

  it('to an unknown name is a tool error that lists the candidates', async () => {
    await say('c-alina', 'Alina');
    const { outcome, toolPart } = await contactTurn('ops', { username: 'alin', text: 'hi' });
    expect(outcome.status).toBe('done');
    expect(toolPart?.state).toBe('output-error');
    expect(toolPart?.errorText).toContain("no contact 'alin'");
    expect(toolPart?.errorText).toContain('Alina — chatKey c-alina');
  });

  it('to a name in several chats is a tool error listing them; the chatKey picks one', async () => {
    await say('group-1', 'Dana');
    await say('dm-dana', 'Dana');
    const first = await contactTurn('ops', { username: 'Dana', text: 'hi' });
    expect(first.toolPart?.state).toBe('output-error');
    expect(first.toolPart?.errorText).toMatch(
      /in 2 chats.*chatKey dm-dana.*chatKey group-1|in 2 chats.*chatKey group-1.*chatKey dm-dana/s,
    );
    const second = await contactTurn('ops2', { username: 'Dana', text: 'hi', chatKey: 'dm-dana' });
    expect(second.toolPart?.output).toMatchObject({ status: 'sent', to: { chatKey: 'dm-dana' } });
    expect(await ing.store.readOutbox('group-1', undefined, 10)).toEqual([]);
  });

  it('is not offered to the model unless CONTACT_SEND is on', async () => {
    const off = await contactTurn('ops', { username: 'x', text: 'y' }, { enabled: false });
    expect(off.seenTools[0]).not.toContain('chat_contact_send');
    expect(off.seenTools[0]).toContain('chat_send');
    const on = await contactTurn('ops2', { username: 'x', text: 'y' });
    expect(on.seenTools[0]).toContain('chat_contact_send');
  });

  it('writes nothing anywhere when the turn’s fence is stale', async () => {
    await say('c-eve', 'Eve');
    const lease = await ing.store.acquire('ops', 'old-turn', 60_000);
    if (!lease.ok) throw new Error('busy');
    await ing.store.acquire('ops', 'old-turn', 60_000); // a newer fence: the old one is stale
    const [eve] = await book.lookup('eve');
    const res = await book.send({ chatKey: 'ops', fence: lease.fence, runId: 'r' }, eve!, 'late');
    expect(res).toMatchObject({ ok: false, reason: 'fenced-out' });
    expect(await ing.store.readOutbox('c-eve', undefined, 10)).toEqual([]);
    expect(await redis.xlen(ing.store.keys('ops').relay)).toBe(0);
  });

  it('a send left half done by a crash is finished once by the sweeper', async () => {
    await say('c-finn', 'Finn');
    const lease = await ing.store.acquire('ops', 'crashing-turn', 60_000);
    if (!lease.ok) throw new Error('busy');
    const k = ing.store.keys('ops');
    // The turn recorded its send under its fence, then died before writing the other chat.
    await scripts.contactSend.run(
      redis,
      [k.meta, k.relay, k.events],
      [lease.fence, 100, 'run-1', 'send-1', 'c-finn', 'Finn', 'see you at 5', Date.now()],
      undefined,
    );
    expect((await ing.store.sweepCheck('ops')).relays).toBe(1);
    await sweepTwice('ops');
    expect((await ing.store.readOutbox('c-finn', undefined, 10)).map((i) => i.text)).toEqual([
      'see you at 5',
    ]);
    expect((await ing.store.sweepCheck('ops')).relays).toBe(0);
  });

  it('whose recording fails ends the turn uncommitted, and the retry sends it once', async () => {
    await say('c-gil', 'Gil');
    // Redis gone while the fenced script is on its way (ioredis's own error): was it recorded?
    const record = vi
      .spyOn(scripts.contactSend, 'run')
      .mockRejectedValueOnce(new Error('Connection is closed.'));
    try {
      const { outcome, toolPart, model, deps } = await contactTurn('ops', { username: 'gil', text: 'ping' });
      expect(outcome).toMatchObject({ status: 'threw', err: { message: 'Connection is closed.' } });
      // Ended at the failed write: the model never read a tool error, nothing was committed.
      expect(model.calls()).toBe(1);
      expect(toolPart).toBeUndefined();
      expect(await ing.store.pendingCount('ops')).toBe(1);
      const failed = (await ing.store.readEvents('ops', undefined, 50)).find((e) => e.type === 'turn.failed');
      expect(failed?.data).toMatchObject({ reason: 'retry' });

      const retry = await runTurn(deps, 'ops');
      expect(retry.status).toBe('done');
      expect(record).toHaveBeenCalledTimes(2);
      expect((await ing.store.readOutbox('c-gil', undefined, 10)).map((i) => i.text)).toEqual(['ping']);
    } finally {
      record.mockRestore();
    }
  });

  it('recorded but not yet written to the other chat is reported pending and finished once by the sweeper', async () => {
    await say('c-hal', 'Hal');
    const write = vi
      .spyOn(scripts.contactReceive, 'run')
      .mockRejectedValueOnce(new Error('Connection is closed.'));
    try {
      const { outcome, toolPart } = await contactTurn('ops', { username: 'hal', text: 'at 6' });
      // Not a tool error: the model would send it again under a new id, which no dedupe catches.
      expect(outcome.status).toBe('done');
      expect(toolPart).toMatchObject({
        state: 'output-available',
        output: { status: 'sent', delivered: 'pending' },
      });
      expect(await ing.store.readOutbox('c-hal', undefined, 10)).toEqual([]);
      expect((await ing.store.sweepCheck('ops')).relays).toBe(1);
    } finally {
      write.mockRestore();
    }
    await sweepTwice('ops');
    expect((await ing.store.readOutbox('c-hal', undefined, 10)).map((i) => i.text)).toEqual(['at 6']);
  });
});
