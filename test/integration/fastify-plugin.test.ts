import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import { chatlaneFastify } from '../../src/start/fastify.js';
import { deletePrefix, REDIS_ENV, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * chatlane's routes inside an app of its own: the app has its own route, its own auth (a key
 * header, in its own scope), its own text parser, error handler and 404. chatlane's routes sit
 * under /chat with chatlane's auth, parser and error shapes; each side's stay its own.
 */

const API_TOKEN = 'lane-api-token-of-at-least-32-characters';
const METRICS_TOKEN = 'lane-metrics-token-of-at-least-32-characters';
const WEB_SECRET = 'a-web-token-secret-of-at-least-32-characters';
const APP_KEY = 'app-key';
const redis = testRedis('ingress');
const prefix = randomPrefix('fastify-plugin');
let app: FastifyInstance;

beforeAll(async () => {
  app = Fastify({ routerOptions: { maxParamLength: 256 } });
  app.addContentTypeParser('text/plain', { parseAs: 'string' }, (_request, body, done) => done(null, body));
  app.setErrorHandler((err: FastifyError, _request, reply) =>
    reply.code(err.statusCode ?? 500).send({ appError: err.message }),
  );
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ appError: 'no such page' }));
  await app.register(
    async (own) => {
      own.addHook('onRequest', async (request, reply) => {
        if (request.headers['x-app-key'] !== APP_KEY) return reply.code(401).send({ appError: 'app key' });
      });
      own.get('/hello', async () => ({ hello: 'from the app' }));
      own.post('/echo', async (request) => ({ echoed: request.body }));
      own.get('/boom', async () => {
        throw new Error('the app broke');
      });
    },
    { prefix: '/app' },
  );
  await app.register(chatlaneFastify, {
    prefix: '/chat',
    env: {
      ...REDIS_ENV,
      CHATLANE_PREFIX: prefix,
      API_TOKEN,
      METRICS_TOKEN,
      WEB_TOKEN_SECRET: WEB_SECRET,
      LOG_LEVEL: 'silent',
    },
    health: true,
    metrics: true,
  });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('chatlaneFastify in an app with its own route and auth', () => {
  it("the app's route answers with the app's key and no chatlane token; chatlane's auth does not reach it", async () => {
    const refused = await app.inject({ method: 'GET', url: '/app/hello' });
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toEqual({ appError: 'app key' });
    const served = await app.inject({ method: 'GET', url: '/app/hello', headers: { 'x-app-key': APP_KEY } });
    expect(served.statusCode).toBe(200);
    expect(served.json()).toEqual({ hello: 'from the app' });
  });

  it("chatlane's API under the prefix takes API_TOKEN and not the app's key; the app's auth does not reach it", async () => {
    const body = { id: 'plugin-m1', text: 'hello' };
    const refused = await app.inject({
      method: 'POST',
      url: '/chat/v1/chats/plugin-chat/messages',
      headers: { 'x-app-key': APP_KEY },
      payload: body,
    });
    expect(refused.statusCode).toBe(401);
    expect(refused.json().error.code).toBe('UNAUTHORIZED');
    const accepted = await app.inject({
      method: 'POST',
      url: '/chat/v1/chats/plugin-chat/messages',
      headers: bearer(API_TOKEN),
      payload: body,
    });
    expect(accepted.statusCode).toBe(202);
    expect(accepted.json()).toMatchObject({ status: 'accepted', messageId: 'plugin-m1' });
    const store = new ChatStore(redis, { prefix, maxEvents: 100 });
    expect(await store.pendingCount('plugin-chat')).toBe(1);
  });

  it('a browser token opens its own chat under the prefix, and only that', async () => {
    const token = await mintWebToken(WEB_SECRET, 'plugin-web');
    const own = await app.inject({
      method: 'GET',
      url: '/chat/v1/ui/plugin-web/messages',
      headers: bearer(token),
    });
    expect(own.statusCode).toBe(200);
    const other = await app.inject({
      method: 'GET',
      url: '/chat/v1/ui/plugin-other/messages',
      headers: bearer(token),
    });
    expect(other.statusCode).toBe(403);
    const api = await app.inject({
      method: 'GET',
      url: '/chat/v1/chats/plugin-web/messages',
      headers: bearer(token),
    });
    expect(api.statusCode).toBe(403);
  });

  it("each side parses, fails and misses in its own shape: the app's text body, errors and 404s, chatlane's", async () => {
    const text = await app.inject({
      method: 'POST',
      url: '/app/echo',
      headers: { 'x-app-key': APP_KEY, 'content-type': 'text/plain' },
      payload: 'plain words',
    });
    expect(text.json()).toEqual({ echoed: 'plain words' });
    const chatlaneText = await app.inject({
      method: 'POST',
      url: '/chat/v1/chats/plugin-chat/messages',
      headers: { ...bearer(API_TOKEN), 'content-type': 'text/plain' },
      payload: 'plain words',
    });
    expect(chatlaneText.statusCode).toBe(415);
    expect(chatlaneText.json().error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    const badJson = await app.inject({
      method: 'POST',
      url: '/chat/v1/chats/plugin-chat/messages',
      headers: { ...bearer(API_TOKEN), 'content-type': 'application/json' },
      payload: '{"id":',
    });
    expect(badJson.json().error.code).toBe('INVALID_JSON');
    const boom = await app.inject({ method: 'GET', url: '/app/boom', headers: { 'x-app-key': APP_KEY } });
    expect(boom.json()).toEqual({ appError: 'the app broke' });
    expect((await app.inject({ method: 'GET', url: '/nowhere' })).json()).toEqual({
      appError: 'no such page',
    });
    const missing = await app.inject({ method: 'GET', url: '/chat/v1/nowhere', headers: bearer(API_TOKEN) });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.code).toBe('NOT_FOUND');
  });

  it('health and metrics under the prefix, routes labelled as the standalone ingress labels them', async () => {
    expect((await app.inject({ method: 'GET', url: '/chat/healthz' })).json()).toEqual({ status: 'ok' });
    expect((await app.inject({ method: 'GET', url: '/chat/readyz' })).statusCode).toBe(200);
    const metrics = (
      await app.inject({ method: 'GET', url: '/chat/metrics', headers: bearer(METRICS_TOKEN) })
    ).body;
    expect(metrics).toMatch(/chatlane_messages_total\{result="accepted"\} 1/);
    expect(metrics).toContain('route="/v1/chats/:chatKey/messages"');
    // The app's own routes are not chatlane's to count.
    expect(metrics).not.toContain('/app/hello');
  });

  it('one namespaced decorator on the app (chatlane), none of the generic names it used to declare', async () => {
    expect(app.hasDecorator('chatlane')).toBe(true);
    for (const name of ['deps', 'ingest', 'streams', 'contacts', 'replies', 'lifecycle']) {
      expect(app.hasDecorator(name), name).toBe(false);
    }
    expect(app.hasRequestDecorator('webChat')).toBe(false);
  });
});
