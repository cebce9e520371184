import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * The two long-lived responses, `/v1/chats/:chatKey/stream` and `/v1/ui`, take the response
 * over from Fastify: what hooks set (CORS) must still reach the browser, and the capacity
 * limit refuses both alike, before anything is written.
 */

const SECRET = 'a-web-token-secret-of-at-least-32-characters';
const API_TOKEN = 'api-token-for-the-backend';
const ORIGIN = 'https://app.example.com';
const redis = testRedis('ingress');
const prefix = randomPrefix('hijack');
const open: AbortController[] = [];
let ing: TestIngress;
let base: string;

async function start(maxClients: number): Promise<void> {
  ing = await testIngress(redis, prefix, {
    apiToken: API_TOKEN,
    web: { tokenSecret: SECRET, origins: [ORIGIN], waitMs: 60_000 },
    // No heartbeat within a test's time: a response head must not wait for a body byte.
    streams: { maxClients, heartbeatMs: 600_000 },
  });
  base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
  await queueMetaWritten(redis, prefix);
}

/** A request whose response may stay open: aborted after the test. */
function request(path: string, init: { method?: string; body?: unknown } = {}): Promise<Response> {
  const abort = new AbortController();
  open.push(abort);
  return fetch(`${base}${path}`, {
    method: init.method ?? 'GET',
    signal: abort.signal,
    headers: {
      origin: ORIGIN,
      authorization: `Bearer ${API_TOKEN}`,
      ...(init.body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
  });
}

const uiSend = (chatKey: string, messageId: string) => ({
  id: chatKey,
  messages: [{ id: messageId, role: 'user', parts: [{ type: 'text', text: 'hello' }] }],
  trigger: 'submit-message',
});

beforeAll(async () => {
  await waitReady(redis);
});
afterEach(async () => {
  for (const a of open.splice(0)) a.abort();
  await ing.close();
});
afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

describe('hijacked stream responses', () => {
  it('the live stream and a /v1/ui reply send their head at once, with the CORS headers of an allowed origin, as event streams that close their connection', async () => {
    await start(10);
    const live = await request('/v1/chats/hijack-a/stream');
    expect(live.status).toBe(200);
    expect(live.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(live.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(live.headers.get('connection')).toBe('close');

    const ui = await request('/v1/ui', { method: 'POST', body: uiSend('hijack-a', 'm1') });
    expect(ui.status).toBe(200);
    expect(ui.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(ui.headers.get('content-type')).toBe('text/event-stream');
    expect(ui.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(ui.headers.get('connection')).toBe('close');
  });

  it('at SSE_MAX_CLIENTS a /v1/ui send and resume are refused with 503 STREAM_CAPACITY, the send stores nothing', async () => {
    await start(1);
    const live = await request('/v1/chats/hijack-b/stream');
    expect(live.status).toBe(200);
    const before = (await keysUnder(redis, prefix)).sort();

    const send = await request('/v1/ui', { method: 'POST', body: uiSend('hijack-b', 'm2') });
    expect(send.status).toBe(503);
    expect(((await send.json()) as { error: { code: string } }).error.code).toBe('STREAM_CAPACITY');
    expect(send.headers.get('access-control-allow-origin')).toBe(ORIGIN);

    const resume = await request('/v1/ui/hijack-b/stream');
    expect(resume.status).toBe(503);
    expect(((await resume.json()) as { error: { code: string } }).error.code).toBe('STREAM_CAPACITY');

    const second = await request('/v1/chats/hijack-c/stream');
    expect(second.status).toBe(503);
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('STREAM_CAPACITY');
    expect((await keysUnder(redis, prefix)).sort()).toEqual(before);
  });
});
