import { EventSource } from 'eventsource';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { committedEventData } from '../helpers/messages.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;
let base: string;
const sources: EventSource[] = [];

interface Received {
  type: string;
  id: string;
  data: Record<string, unknown>;
}

/** A real EventSource (the `eventsource` package) on the chat's stream, recording what it gets. */
function listen(chatKey: string, opts: { lastEventId?: string; query?: string; token?: string } = {}) {
  const received: Received[] = [];
  const url = `${base}/v1/chats/${chatKey}/stream${opts.query ?? ''}`;
  const es = new EventSource(url, {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: {
          ...(init?.headers as Record<string, string>),
          ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}),
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
        },
      }),
  });
  sources.push(es);
  for (const type of ['ready', 'outbox', 'event']) {
    es.addEventListener(type, (e) => {
      received.push({ type, id: e.lastEventId, data: JSON.parse(e.data) as Record<string, unknown> });
    });
  }
  const ready = waitFor(async () => received.some((r) => r.type === 'ready'), { what: 'the ready event' });
  return { es, received, ready };
}

async function fence(chatKey: string): Promise<string> {
  const lease = await ing.store.acquire(chatKey, `turn-${chatKey}`, 60_000);
  if (!lease.ok) throw new Error('busy');
  return lease.fence;
}

async function send(chatKey: string, text: string): Promise<string> {
  const res = await ing.store.sendOutbox(chatKey, await fence(chatKey), {
    runId: 'r1',
    text,
    ts: Date.now(),
  });
  if (!res.ok) throw new Error('fenced out');
  return res.id;
}

const texts = (received: Received[]) => received.filter((r) => r.type === 'outbox').map((r) => r.data.text);

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('sse');
  ing = await testIngress(redis, prefix, { streams: { heartbeatMs: 200, blockMs: 2000 } });
  base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
});
afterEach(async () => {
  for (const es of sources.splice(0)) es.close();
  // fetch (undici) leaves sockets to the server open after a cancelled body (one that never
  // carries a request, so not even "idle" to Node) until its keep-alive timeout; drop them.
  const closeIdle = setInterval(() => ing.app.server.closeAllConnections(), 20);
  await ing.close();
  clearInterval(closeIdle);
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('GET /v1/chats/:chatKey/stream', () => {
  it('a client connected before the reply receives it, and the chat’s events, as they happen', async () => {
    const client = listen('alice');
    await client.ready;
    const id = await send('alice', 'hello from the agent');
    await ing.store.appendEvent('alice', 'turn.committed', committedEventData('r1'));
    await waitFor(async () => client.received.length >= 3, { what: 'reply and event' });
    const [, reply, event] = client.received;
    expect(reply).toMatchObject({ type: 'outbox', data: { id, text: 'hello from the agent', runId: 'r1' } });
    expect(event).toMatchObject({ type: 'event', data: { type: 'turn.committed', data: { runId: 'r1' } } });
    // Each id is the client's position in both streams after that message.
    expect(reply!.id).toBe(`${id}.0-0`);
    expect(event!.id).toMatch(new RegExp(`^${id}\\.\\d+-\\d+$`));
  });

  it('starts at “now”: what the outbox held before the client connected is not replayed', async () => {
    await send('alice', 'old');
    const client = listen('alice');
    await client.ready;
    await send('alice', 'new');
    await waitFor(async () => texts(client.received).length === 1, { what: 'the new reply' });
    expect(texts(client.received)).toEqual(['new']);
  });

  it('reconnecting with Last-Event-ID gets only what came after it, in order', async () => {
    const first = listen('alice');
    await first.ready;
    await send('alice', 'one');
    await send('alice', 'two');
    await waitFor(async () => texts(first.received).length === 2, { what: 'two replies' });
    const lastId = first.received.at(-1)!.id;
    first.es.close();

    await send('alice', 'three');
    await ing.store.appendEvent('alice', 'turn.committed', committedEventData('r2'));
    await send('alice', 'four');
    const again = listen('alice', { lastEventId: lastId });
    await waitFor(async () => texts(again.received).length === 2, { what: 'the missed replies' });
    await send('alice', 'five');
    await waitFor(async () => texts(again.received).length === 3, { what: 'the live reply' });
    expect(texts(again.received)).toEqual(['three', 'four', 'five']);
    // The missed event is replayed too (the two streams are merged by millisecond: within one
    // millisecond their order against each other is not known).
    expect(again.received.filter((r) => r.type === 'event').map((r) => r.data.type)).toEqual([
      'turn.committed',
    ]);
    expect(again.received[0]!.id).toBe(lastId);
  });

  it('takes the cursor as ?lastEventId= for clients that cannot set the header', async () => {
    const first = listen('bob');
    await first.ready;
    await send('bob', 'one');
    await waitFor(async () => texts(first.received).length === 1, { what: 'one reply' });
    const lastId = first.received.at(-1)!.id;
    await send('bob', 'two');
    const again = listen('bob', { query: `?lastEventId=${encodeURIComponent(lastId)}` });
    await waitFor(async () => texts(again.received).length === 1, { what: 'the missed reply' });
    expect(texts(again.received)).toEqual(['two']);
  });

  it('serves many clients of many chats from one reader, each only its own chat', async () => {
    const chats = ['c1', 'c2', 'c3'];
    const clients = chats.flatMap((c) => [listen(c), listen(c)]);
    await Promise.all(clients.map((c) => c.ready));
    for (const c of chats) await send(c, `for ${c}`);
    await waitFor(async () => clients.every((c) => texts(c.received).length === 1), { what: 'every client' });
    clients.forEach((c, i) => {
      expect(texts(c.received)).toEqual([`for ${chats[Math.floor(i / 2)]}`]);
    });
    expect(ing.app.chatlane.streams.size).toBe(6);
  });

  it('sends heartbeat comments to idle clients', async () => {
    const res = await fetch(`${base}/v1/chats/alice/stream`);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes(': heartbeat')) text += new TextDecoder().decode((await reader.read()).value);
    expect(text).toMatch(/^retry: 2000\nid: 0-0\.0-0\nevent: ready\n/);
    await reader.cancel();
  });

  it('ends open streams when the ingress closes, so shutdown is not held up', async () => {
    const res = await fetch(`${base}/v1/chats/alice/stream`);
    const reader = res.body!.getReader();
    await reader.read();
    const closed = ing.app.close();
    let done = false;
    while (!done) done = (await reader.read()).done;
    await closed;
    expect(ing.app.chatlane.streams.size).toBe(0);
  });
});

describe('the one reader, blocked in XREAD for longer than any test waits', () => {
  it('takes in every chat watched while it is blocked, from the first one after it started', async () => {
    await ing.close();
    ing = await testIngress(redis, prefix, { streams: { heartbeatMs: 200, blockMs: 600_000 } });
    base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
    // The first client starts the reader, blocked on that chat alone; each later chat must
    // interrupt it (its replies would otherwise wait for the ten-minute block to end).
    const first = listen('first');
    await first.ready;
    for (let i = 0; i < 15; i++) {
      const client = listen(`later-${i}`);
      await client.ready;
      await send(`later-${i}`, `reply ${i}`);
      await waitFor(async () => texts(client.received).length === 1, {
        timeoutMs: 10_000,
        what: `the reply of later-${i} while the reader was blocked`,
      });
    }
    await send('first', 'still there');
    await waitFor(async () => texts(first.received).length === 1, { what: 'the first chat' });
  });
});

describe('GET /v1/chats/:chatKey/stream refuses before the stream opens', () => {
  const get = (url: string, headers: Record<string, string> = {}) =>
    ing.app.inject({ method: 'GET', url, headers });

  // Chat keys only: BullMQ writes its queue's meta key whenever its connection comes up.
  const chatKeysNow = async () => (await keysUnder(redis, prefix)).filter((k) => k.includes(':{c:'));

  it('an invalid chatKey: 400 INVALID_CHAT_KEY', async () => {
    const before = await chatKeysNow();
    const res = await get('/v1/chats/a%20b/stream');
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expect(res.json().error.code).toBe('INVALID_CHAT_KEY');
    expect(ing.app.chatlane.streams.size).toBe(0);
    expect(await chatKeysNow()).toEqual(before);
  });

  it('a Last-Event-ID this stream never sent: 400 INVALID_CURSOR', async () => {
    for (const id of ['1-0', 'abc', '1-0.x', '99999999999999999999999-0.0-0']) {
      const res = await get('/v1/chats/alice/stream', { 'last-event-id': id });
      expect(res.statusCode, id).toBe(400);
      expect(res.json().error.code).toBe('INVALID_CURSOR');
    }
  });

  it('without the API token: 401 UNAUTHORIZED; with it, the stream opens', async () => {
    await ing.close();
    ing = await testIngress(redis, prefix, { apiToken: 'sekret' });
    base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
    const before = await chatKeysNow();
    const res = await get('/v1/chats/alice/stream');
    expect(res.statusCode).toBe(401);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expect(res.json().error.code).toBe('UNAUTHORIZED');
    expect(ing.app.chatlane.streams.size).toBe(0);
    expect(await chatKeysNow()).toEqual(before);
    const ok = listen('alice', { token: 'sekret' });
    await ok.ready;
  });

  it('over SSE_MAX_CLIENTS: 503 STREAM_CAPACITY', async () => {
    await ing.close();
    ing = await testIngress(redis, prefix, { streams: { maxClients: 1 } });
    base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
    await listen('alice').ready;
    const res = await fetch(`${base}/v1/chats/alice/stream`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('STREAM_CAPACITY');
  });
});
