import { APICallError } from 'ai';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { lazyChatKeys } from '../../src/shared/keys.js';
import { waitReady } from '../../src/shared/redis.js';
import { standardSources } from '../../src/shared/webhooks/standard.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { echoScript, type Script, scriptedModel } from '../helpers/scripted-model.js';
import { chatFromTelegram, startTelegramSide, type TelegramSide } from '../helpers/telegram.js';
import { turnDeps } from '../helpers/turn-deps.js';
import { signedHeaders, webhookSecret } from '../helpers/webhooks.js';

/**
 * Which turns stream (REPLY_STREAMING=auto): only one whose reply can be watched. A chat from
 * a platform without PLATFORM_STREAMING, the HTTP API or a signed webhook runs `generateText`
 * and writes no reply stream; a /v1/ui message streams; a reader that opens while an
 * unstreamed turn runs gets that turn's whole reply when it commits.
 */

const redis = testRedis();
const SECRET = webhookSecret();
let prefix: string;
let ing: TestIngress;
let base: string;
const open: AbortController[] = [];

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('watch');
  ing = await testIngress(redis, prefix, {
    web: { waitMs: 60_000 },
    genericWebhooks: {
      sources: standardSources([{ name: 'crm', secrets: [SECRET] }]),
      replyPolicy: { allowHttp: false, hosts: [] },
    },
  });
  base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
  await queueMetaWritten(redis, prefix);
});
afterEach(async () => {
  for (const a of open.splice(0)) a.abort();
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

/** A worker's turn deps on the test's prefix, with a model that answers whole or streamed. */
function worker(script: Script = echoScript, extra: Partial<TurnDeps> = {}) {
  const scripted = scriptedModel(script);
  const deps: TurnDeps = { ...turnDeps(redis, prefix, scripted.model), ...extra };
  return { deps, model: scripted.model };
}

/** The reply stream keys a chat has (`…:ui:<runId>`). */
const replyKeys = (chatKey: string) => redis.keys(`${prefix}:{c:${chatKey}}:ui:*`);

async function eventTypes(deps: TurnDeps, chatKey: string): Promise<string[]> {
  return (await deps.store.readEvents(chatKey, undefined, 100)).map((e) => e.type);
}

const apiSend = (chatKey: string, id: string, text: string) =>
  fetch(`${base}/v1/chats/${chatKey}/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id, text }),
  });

/** A streamed response read to its end (or until aborted): its body so far. */
function streamed(path: string, body?: unknown): Promise<{ status: number; text: Promise<string> }> {
  const abort = new AbortController();
  open.push(abort);
  return fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    signal: abort.signal,
    ...(body !== undefined && {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
  }).then((res) => ({ status: res.status, text: res.text() }));
}

/** The chunks of a UI message stream body, `[DONE]` left out. */
function chunksOf(body: string): Array<{ type: string } & Record<string, unknown>> {
  return body
    .split('\n\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice('data: '.length)) as { type: string } & Record<string, unknown>);
}

const uiMessage = (chatKey: string, id: string, text: string) => ({
  id: chatKey,
  messages: [{ id, role: 'user', parts: [{ type: 'text', text }] }],
  trigger: 'submit-message',
});

describe('a turn nobody watches does not stream', () => {
  it('an HTTP API chat: generateText, no reply stream, no reply.started; the reply is in the outbox', async () => {
    const { deps, model } = worker();
    expect((await apiSend('api-1', 'm1', 'hello')).status).toBe(202);
    expect(await runTurn(deps, 'api-1')).toMatchObject({ status: 'done', sent: 1 });
    expect(model.doStreamCalls).toHaveLength(0);
    expect(model.doGenerateCalls.length).toBeGreaterThan(0);
    expect(await replyKeys('api-1')).toEqual([]);
    expect(await eventTypes(deps, 'api-1')).not.toContain('reply.started');
    const [item] = await deps.store.readOutbox('api-1', undefined, 10);
    expect(item?.text).toBe('echo: hello');
  });

  it('a signed webhook chat: generateText and no reply stream', async () => {
    const { deps, model } = worker();
    const payload = JSON.stringify({ chatKey: 'crm-7', text: 'from the crm' });
    const res = await ing.app.inject({
      method: 'POST',
      url: '/webhooks/generic/crm',
      headers: signedHeaders(SECRET, payload),
      payload,
    });
    expect(res.statusCode).toBe(202);
    const chatKey = (res.json() as { chatKey: string }).chatKey;
    expect(await runTurn(deps, chatKey)).toMatchObject({ status: 'done', sent: 1 });
    expect(model.doStreamCalls).toHaveLength(0);
    expect(await replyKeys(chatKey)).toEqual([]);
  });

  it('REPLY_STREAMING=always streams a chat nobody watches', async () => {
    const { deps, model } = worker(echoScript, { replyStreaming: 'always' });
    expect((await apiSend('api-2', 'm1', 'hello')).status).toBe(202);
    expect(await runTurn(deps, 'api-2')).toMatchObject({ status: 'done' });
    expect(model.doGenerateCalls).toHaveLength(0);
    expect(model.doStreamCalls.length).toBeGreaterThan(0);
    expect(await replyKeys('api-2')).toHaveLength(1);
  });
});

describe('platform chats', () => {
  let tg: TelegramSide;
  beforeEach(async () => {
    tg = await startTelegramSide(redis, prefix);
  });
  afterEach(() => tg.close());

  it('without PLATFORM_STREAMING a platform chat runs unstreamed; with it, streams', async () => {
    const chatKey = await chatFromTelegram(tg.ing, 4401);
    const off = worker(echoScript, { deliver: async () => undefined });
    expect(await runTurn(off.deps, chatKey)).toMatchObject({ status: 'done', sent: 1 });
    expect(off.model.doStreamCalls).toHaveLength(0);
    expect(await replyKeys(chatKey)).toEqual([]);

    await chatFromTelegram(tg.ing, 4401);
    const on = worker(echoScript, { deliver: async () => undefined, platformStreaming: true });
    expect(await runTurn(on.deps, chatKey)).toMatchObject({ status: 'done', sent: 1 });
    expect(on.model.doGenerateCalls).toHaveLength(0);
    expect(on.model.doStreamCalls.length).toBeGreaterThan(0);
    expect(await replyKeys(chatKey)).toHaveLength(1);
  });
});

describe('a chat someone watches', () => {
  it('a /v1/ui message marks the chat watched as it is stored: its turn streams, and the POST gets the reply', async () => {
    const { deps, model } = worker();
    const res = await streamed('/v1/ui', uiMessage('web-1', 'm1', 'hello'));
    expect(res.status).toBe(200);
    await waitFor(async () => (await deps.store.pendingCount('web-1')) === 1, { what: 'the message stored' });
    expect(await redis.pttl(lazyChatKeys(prefix, 'web-1').watch)).toBeGreaterThan(0);
    expect(await runTurn(deps, 'web-1')).toMatchObject({ status: 'done' });
    expect(model.doStreamCalls.length).toBeGreaterThan(0);
    expect(model.doGenerateCalls).toHaveLength(0);
    const chunks = chunksOf(await res.text);
    expect(chunks.find((c) => c.type === 'text-delta')?.delta).toBe('echo: hello');
    expect(chunks.at(-1)?.type).toBe('finish');
  });

  it('REPLY_STREAMING=never: the /v1/ui turn does not stream, and its POST gets the whole reply at the commit', async () => {
    const { deps, model } = worker(echoScript, { replyStreaming: 'never' });
    const res = await streamed('/v1/ui', uiMessage('web-2', 'm1', 'hello'));
    await waitFor(async () => (await deps.store.pendingCount('web-2')) === 1, { what: 'the message stored' });
    expect(await runTurn(deps, 'web-2')).toMatchObject({ status: 'done' });
    expect(model.doStreamCalls).toHaveLength(0);
    const chunks = chunksOf(await res.text);
    expect(chunks.map((c) => c.type)).toEqual([
      'start',
      'start-step',
      'text-start',
      'text-delta',
      'text-end',
      'finish-step',
      'finish',
    ]);
    expect(chunks[3]).toMatchObject({ delta: 'echo: hello' });
  });

  it('a reader that opens while an unstreamed turn runs is not turned away and gets the whole reply at the commit', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { deps, model } = worker(async (...args) => {
      if (args[1] === 0) await gate;
      return echoScript(...args);
    });
    expect((await apiSend('api-3', 'm1', 'hello')).status).toBe(202);
    const turn = runTurn(deps, 'api-3');
    await waitFor(async () => model.doGenerateCalls.length === 1, { what: 'the model called' });
    // No reply stream yet: the turn does not stream. The reader waits for it all the same.
    expect(await replyKeys('api-3')).toEqual([]);
    const res = await streamed('/v1/ui/api-3/stream');
    expect(res.status).toBe(200);
    release();
    expect(await turn).toMatchObject({ status: 'done', sent: 1 });
    expect(model.doStreamCalls).toHaveLength(0);
    const chunks = chunksOf(await res.text);
    expect(chunks[0]).toMatchObject({ type: 'start' });
    const send = chunks.find((c) => c.type === 'text-start');
    expect(send?.providerMetadata).toEqual({ chatlane: { tool: 'chat_send' } });
    expect(chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta)).toEqual(['echo: hello']);
    expect(chunks.at(-1)?.type).toBe('finish');
    // The reader marked the chat watched: the next turn streams.
    expect((await apiSend('api-3', 'm2', 'again')).status).toBe(202);
    expect(await runTurn(deps, 'api-3')).toMatchObject({ status: 'done' });
    expect(model.doStreamCalls.length).toBeGreaterThan(0);
  });

  it('a reader of an unstreamed turn that ends without a commit stops waiting (turn.released)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { deps, model } = worker(async () => {
      await gate;
      throw new APICallError({
        message: 'overloaded',
        url: 'http://model.invalid',
        requestBodyValues: {},
        statusCode: 503,
        isRetryable: false,
      });
    });
    expect((await apiSend('api-4', 'm1', 'hello')).status).toBe(202);
    const turn = runTurn(deps, 'api-4').catch((err: unknown) => err);
    await waitFor(async () => model.doGenerateCalls.length === 1, { what: 'the model called' });
    const res = await streamed('/v1/ui/api-4/stream');
    expect(res.status).toBe(200);
    release();
    expect(await turn).toBeInstanceOf(Error);
    expect(await eventTypes(deps, 'api-4')).toContain('turn.released');
    // The response ends (after the grace a closing chunk gets), with the message still queued.
    expect(await res.text).toContain('data: [DONE]');
    expect(await deps.store.pendingCount('api-4')).toBe(1);
  });

  it('a reader that opens when no turn holds the chat gets 204 and marks nothing', async () => {
    expect((await apiSend('api-5', 'm1', 'hello')).status).toBe(202);
    const res = await streamed('/v1/ui/api-5/stream');
    expect(res.status).toBe(204);
    expect(await redis.exists(lazyChatKeys(prefix, 'api-5').watch)).toBe(0);
  });
});
