import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type IngressHandle, startIngress } from '../../src/roles/ingress.js';
import { loadConfig } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import { deletePrefix, REDIS_ENV, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/**
 * The stream caps of a real ingress process (`startIngress` from its configuration, listening,
 * real HTTP, streams really open): SSE_MAX_CLIENTS for the process, SSE_MAX_CLIENTS_PER_CHAT for
 * each chat across every kind of streamed response, and a closed stream's slot free again.
 */

const API_TOKEN = 'an-api-token-for-the-stream-caps-test';
const SECRET = 'a-web-token-secret-of-at-least-32-characters';
const redis = testRedis();
let prefix: string;
let ingress: IngressHandle;
const open: AbortController[] = [];

async function start(env: Record<string, string>): Promise<void> {
  ingress = await startIngress(
    loadConfig({
      ...REDIS_ENV,
      CHATLANE_PREFIX: prefix,
      HOST: '127.0.0.1',
      PORT: '0',
      API_TOKEN,
      WEB_TOKEN_SECRET: SECRET,
      ...env,
    }),
    silentLogger(),
  );
}

interface Opened {
  status: number;
  code?: string;
  abort: AbortController;
  /** The body read so far (a stream's first bytes). */
  text: () => string;
}

/** A request whose response may stay open; a 200 stream keeps reading until aborted. */
async function request(
  path: string,
  opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Opened> {
  const abort = new AbortController();
  open.push(abort);
  const res = await fetch(`${ingress.url}${path}`, {
    method: opts.body === undefined ? 'GET' : 'POST',
    signal: abort.signal,
    headers: {
      authorization: `Bearer ${opts.token ?? API_TOKEN}`,
      ...(opts.body !== undefined && { 'content-type': 'application/json' }),
      ...opts.headers,
    },
    ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }),
  });
  let text = '';
  if (res.status === 200) {
    const reader = res.body!.getReader();
    void (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        text += new TextDecoder().decode(value);
      }
    })().catch(() => undefined);
    return { status: 200, abort, text: () => text };
  }
  const body = res.status === 204 ? {} : ((await res.json()) as { error?: { code: string } });
  return { status: res.status, ...(body.error && { code: body.error.code }), abort, text: () => text };
}

const live = (chatKey: string, token?: string) =>
  request(`/v1/chats/${chatKey}/stream`, token ? { token } : {});
const uiSend = (chatKey: string, messageId: string, token?: string) =>
  request('/v1/ui', {
    ...(token && { token }),
    body: {
      id: chatKey,
      messages: [{ id: messageId, role: 'user', parts: [{ type: 'text', text: 'hello' }] }],
      trigger: 'submit-message',
    },
  });
const uiResume = (chatKey: string, token?: string) =>
  request(`/v1/ui/${chatKey}/stream`, token ? { token } : {});

/** Make a reply of `chatKey` live (a turn holds the chat and has opened its reply stream), so a resume stays open. */
async function liveReply(chatKey: string): Promise<void> {
  const store = new ChatStore(redis, { prefix, maxEvents: 100 });
  const replies = new ReplyStreams(redis, { prefix, maxEvents: 100, maxLen: 100, ttlMs: 60_000 });
  const lease = await store.acquire(chatKey, `w1:run-${chatKey}`, 60_000);
  if (!lease.ok) throw new Error('busy');
  await replies.write(chatKey, lease.fence, `run-${chatKey}`, 'open', [
    ['c', JSON.stringify({ type: 'start' })],
  ]);
}

beforeAll(() => waitReady(redis));
beforeEach(() => {
  prefix = randomPrefix('streamcap');
});
afterEach(async () => {
  for (const a of open.splice(0)) a.abort();
  await ingress.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('the stream settings reach the ingress', () => {
  it('SSE_MAX_CLIENTS, SSE_MAX_CLIENTS_PER_CHAT, SSE_HEARTBEAT_MS and SSE_POLL_* from the configuration', async () => {
    await start({
      SSE_MAX_CLIENTS: '6',
      SSE_MAX_CLIENTS_PER_CHAT: '4',
      SSE_HEARTBEAT_MS: '150',
      SSE_POLL_MS: '40',
      SSE_POLL_MAX_MS: '700',
    });
    expect(ingress.app.chatlane.streams.settings).toMatchObject({
      maxClients: 6,
      maxClientsPerChat: 4,
      heartbeatMs: 150,
      pollMs: 40,
      pollMaxMs: 700,
    });
    // The heartbeat is the configured one, not the default 15 s.
    const stream = await live('beat');
    await waitFor(async () => stream.text().includes(': heartbeat'), {
      what: 'a heartbeat',
      timeoutMs: 10_000,
    });
    // Both caps are exported.
    const registry = ingress.app.chatlane.deps.metrics!.registry;
    expect(await registry.getSingleMetricAsString('chatlane_sse_max_clients')).toMatch(
      /chatlane_sse_max_clients 6$/m,
    );
    expect(await registry.getSingleMetricAsString('chatlane_sse_max_clients_per_chat')).toMatch(
      /chatlane_sse_max_clients_per_chat 4$/m,
    );
  });
});

describe('SSE_MAX_CLIENTS: the process cap', () => {
  it('past it every kind of stream is 503 STREAM_CAPACITY, and a closed stream frees its slot', async () => {
    await start({ SSE_MAX_CLIENTS: '6', SSE_MAX_CLIENTS_PER_CHAT: '2' });
    const held: Opened[] = [];
    for (const chatKey of ['a', 'b', 'c']) for (let i = 0; i < 2; i++) held.push(await live(chatKey));
    expect(held.map((h) => h.status)).toEqual([200, 200, 200, 200, 200, 200]);
    await liveReply('d');
    const refused = await Promise.all([live('d'), uiSend('d', 'm1'), uiResume('d')]);
    expect(refused.map((r) => [r.status, r.code])).toEqual([
      [503, 'STREAM_CAPACITY'],
      [503, 'STREAM_CAPACITY'],
      [503, 'STREAM_CAPACITY'],
    ]);
    const refusedBefore = await refusals('process');
    expect((await live('d')).status).toBe(503);
    expect(await refusals('process')).toBe(refusedBefore + 1);

    held[0]!.abort.abort();
    await waitFor(async () => ingress.app.chatlane.streams.size === 5, {
      what: 'the closed stream to leave its slot',
    });
    expect((await live('d')).status).toBe(200);
    expect((await live('e')).status).toBe(503);
  });
});

describe('SSE_MAX_CLIENTS_PER_CHAT: the per-chat cap', () => {
  it('one browser token cannot hold more than the cap on its chat, live streams, sends and resumes together; other chats still get theirs', async () => {
    await start({ SSE_MAX_CLIENTS: '100', SSE_MAX_CLIENTS_PER_CHAT: '3' });
    const token = await mintWebToken(SECRET, 'mine');
    await liveReply('mine');
    const held = [
      await live('mine', token),
      await uiSend('mine', 'm1', token),
      await uiResume('mine', token),
    ];
    expect(held.map((h) => h.status)).toEqual([200, 200, 200]);

    const refused = await Promise.all([
      live('mine', token),
      uiSend('mine', 'm2', token),
      uiResume('mine', token),
    ]);
    expect(refused.map((r) => [r.status, r.code])).toEqual([
      [429, 'STREAM_LIMIT'],
      [429, 'STREAM_LIMIT'],
      [429, 'STREAM_LIMIT'],
    ]);
    // The API token is held to the same cap: it counts streams, not tokens.
    expect((await live('mine')).code).toBe('STREAM_LIMIT');
    expect((await live('other')).status).toBe(200);
    expect(await refusals('chat')).toBeGreaterThanOrEqual(4);

    // A refused send stored nothing: only m1 is pending.
    const pending = await new ChatStore(redis, { prefix, maxEvents: 100 }).readAllPending('mine');
    expect(pending.map((m) => m.id)).toEqual(['m1']);

    held[1]!.abort.abort();
    await waitFor(async () => ingress.app.chatlane.streams.sizeOf('mine') === 2, {
      what: 'the closed send to leave its slot',
    });
    expect((await live('mine', token)).status).toBe(200);
    expect((await live('mine', token)).code).toBe('STREAM_LIMIT');
  });

  it('many streams opened at once on one chat: exactly the cap is served', async () => {
    await start({ SSE_MAX_CLIENTS: '100', SSE_MAX_CLIENTS_PER_CHAT: '5' });
    const answers = await Promise.all(Array.from({ length: 40 }, () => live('burst')));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(5);
    expect(answers.filter((a) => a.code === 'STREAM_LIMIT')).toHaveLength(35);
  });
});

async function refusals(limit: 'process' | 'chat'): Promise<number> {
  const text = await ingress.app.chatlane.deps.metrics!.registry.getSingleMetricAsString(
    'chatlane_sse_refused_total',
  );
  const line = new RegExp(`^chatlane_sse_refused_total\\{limit="${limit}"\\} (\\d+)$`, 'm').exec(text);
  return line ? Number(line[1]) : 0;
}
