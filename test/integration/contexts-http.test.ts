import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { applyCompaction, readSnapshot } from '../../src/shared/store/archive.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { assistantMessage, counted, userMessage } from '../helpers/messages.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';

const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('ctxhttp');
  ing = await testIngress(redis, prefix);
});
afterEach(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

async function seed(chatKey: string, n: number, word = 'topic') {
  const lease = await ing.store.acquire(chatKey, 'seed', 5000);
  if (!lease.ok) throw new Error('busy');
  const messages = Array.from({ length: n }, (_, i) =>
    counted(
      i % 2 === 0
        ? userMessage(chatKey, `${word}-${i}`, `${word} question ${i}`)
        : assistantMessage(chatKey, `${word}-${i}`, `${word} answer ${i}`),
    ),
  );
  await ing.store.commit(chatKey, lease.fence, { runId: 'seed', consumed: [], messages });
  await ing.store.finish(chatKey, lease.fence, 'seed', 'seed');
}

const action = (chatKey: string, payload: unknown) =>
  ing.app.inject({ method: 'POST', url: `/v1/chats/${chatKey}/contexts`, payload: payload as object });

/** Everything the chat has in Redis, values included, to prove an error wrote nothing. */
async function dump(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of await keysUnder(redis, prefix)) {
    if (!key.includes(':{c:')) continue;
    const type = await redis.type(key);
    out[key] =
      type === 'list'
        ? await redis.lrange(key, 0, -1)
        : type === 'hash'
          ? await redis.hgetall(key)
          : type === 'stream'
            ? await redis.xrange(key, '-', '+')
            : await redis.zrange(key, 0, -1);
  }
  return out;
}

describe('context endpoints', () => {
  it('new, list, get, and load by id and by query round-trip through the lane', async () => {
    await seed('c1', 4, 'garden');
    const created = await action('c1', { action: 'new', title: 'Garden' });
    expect(created.statusCode).toBe(200);
    expect(created.json()).toMatchObject({ action: 'new', archivedMessages: 4, loadedContextId: null });
    const id = created.json().archivedContextId as string;

    const list = (await ing.app.inject({ method: 'GET', url: '/v1/chats/c1/contexts' })).json();
    expect(list.contexts.map((c: { id: string; title: string }) => [c.id, c.title])).toEqual([
      [id, 'Garden'],
    ]);
    const one = await ing.app.inject({ method: 'GET', url: `/v1/chats/c1/contexts/${id}` });
    expect(one.statusCode).toBe(200);
    expect(one.json().messages.map((m: { id: string }) => m.id)).toEqual([
      'garden-0',
      'garden-1',
      'garden-2',
      'garden-3',
    ]);

    await seed('c1', 2, 'taxes');
    const byQuery = await action('c1', { action: 'load', query: 'garden' });
    expect(byQuery.statusCode).toBe(200);
    expect(byQuery.json()).toMatchObject({ loadedContextId: id, loadedMessages: 4, archivedMessages: 2 });
    const taxesId = byQuery.json().archivedContextId as string;
    const byId = await action('c1', { action: 'load', contextId: taxesId });
    expect(byId.json()).toMatchObject({ loadedContextId: taxesId, loadedMessages: 2 });
    const history = (await ing.app.inject({ method: 'GET', url: '/v1/chats/c1/messages' })).json().messages;
    expect(history.slice(0, 2).map((m: { id: string }) => m.id)).toEqual(['taxes-0', 'taxes-1']);
    // The lane was released.
    expect((await ing.store.acquire('c1', 'after', 1000)).ok).toBe(true);
  });

  it('answers 404 for an unknown context id or a query with no match, and writes nothing', async () => {
    await seed('c1', 2);
    const before = await dump();
    for (const payload of [
      { action: 'load', contextId: 'ctx-000000000000' },
      { action: 'load', contextId: '{evil}' },
      { action: 'load', query: 'nothing like it' },
    ]) {
      const res = await action('c1', payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(404);
      expect(res.json().error.code).toBe('CONTEXT_NOT_FOUND');
    }
    const get = await ing.app.inject({ method: 'GET', url: '/v1/chats/c1/contexts/ctx-000000000000' });
    expect(get.statusCode).toBe(404);
    expect(await dump()).toEqual(before);
  });

  it('answers 400 for a bad action or body, and writes nothing', async () => {
    await seed('c1', 2);
    const before = await dump();
    for (const payload of [
      { action: 'delete' },
      { action: 'load' },
      { action: 'new', title: 5 },
      { action: 'new', extra: true },
      {},
    ]) {
      const res = await action('c1', payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    expect((await action('bad{key}', { action: 'new' })).statusCode).toBe(400);
    expect(await dump()).toEqual(before);
  });

  it('answers 409 CHAT_BUSY while a turn holds the chat, and writes nothing', async () => {
    await seed('c1', 2);
    const turn = await ing.store.acquire('c1', 'running-turn', 5000);
    expect(turn.ok).toBe(true);
    const before = await dump();
    const res = await action('c1', { action: 'clear' });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.code).toBe('CHAT_BUSY');
    expect(await dump()).toEqual(before);
  });
});

describe('events and archive endpoints', () => {
  it('pages through the event stream with cursors', async () => {
    for (let i = 0; i < 5; i++)
      await ing.store.appendEvent('c1', 'turn.aborted', { runId: 'r', reason: 'test', i });
    const first = (await ing.app.inject({ method: 'GET', url: '/v1/chats/c1/events?limit=3' })).json();
    expect(first.items.map((e: { data: { i: number } }) => e.data.i)).toEqual([0, 1, 2]);
    expect(first.items[0]).toMatchObject({ type: 'turn.aborted' });
    const rest = (
      await ing.app.inject({ method: 'GET', url: `/v1/chats/c1/events?after=${first.next}` })
    ).json();
    expect(rest.items.map((e: { data: { i: number } }) => e.data.i)).toEqual([3, 4]);
  });

  it('pages through archived segments by index', async () => {
    await seed('c1', 12);
    for (const cut of [3, 3]) {
      const snap = await readSnapshot(ing.store, 'c1');
      const head = snap.history.filter((m) => m.metadata.kind !== 'summary').slice(0, cut);
      const replaced = snap.history[0]?.metadata.kind === 'summary' ? [snap.history[0], ...head] : head;
      const range = { fromId: head[0]!.id, toId: head.at(-1)!.id, count: head.length };
      await applyCompaction(ing.store, 'c1', {
        expectedVersion: snap.version,
        replaced,
        summary: counted(
          assistantMessage('c1', `s-${range.toId}`, 'summary', { kind: 'summary', sourceRange: range }),
        ),
        archive: {
          id: `a-${range.toId}`,
          kind: 'compaction',
          createdAt: Date.now(),
          sourceRange: range,
          messages: head,
        },
        maxEvents: 100,
        eventData: {},
      });
    }
    const first = (await ing.app.inject({ method: 'GET', url: '/v1/chats/c1/archive?limit=1' })).json();
    expect(first.items.map((a: { id: string; index: number }) => [a.index, a.id])).toEqual([
      [0, 'a-topic-2'],
    ]);
    const second = (
      await ing.app.inject({ method: 'GET', url: `/v1/chats/c1/archive?after=${first.next}` })
    ).json();
    expect(second.items.map((a: { id: string }) => a.id)).toEqual(['a-topic-5']);
    expect(second.items[0].messages.map((m: { id: string }) => m.id)).toEqual([
      'topic-3',
      'topic-4',
      'topic-5',
    ]);
  });

  it('refuses malformed cursors with 400', async () => {
    for (const [url, code] of [
      ['/v1/chats/c1/events?after=x', 'INVALID_CURSOR'],
      ['/v1/chats/c1/archive?after=-1', 'INVALID_CURSOR'],
      ['/v1/chats/c1/archive?limit=1000', 'VALIDATION_FAILED'],
    ]) {
      const res = await ing.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe(code);
    }
  });
});
