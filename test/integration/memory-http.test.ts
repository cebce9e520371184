import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { readMemory } from '../../src/shared/store/memory.js';
import { docBlock } from '../helpers/docs.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { userMessage } from '../helpers/messages.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';

const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;
const TOKEN = 'memory-test-token';
const auth = { authorization: `Bearer ${TOKEN}` };

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('memhttp');
  ing = await testIngress(redis, prefix, { apiToken: TOKEN, memoryMaxTokens: 20 });
  await queueMetaWritten(redis, prefix);
  await ing.store.ingest('c1', userMessage('c1', 'm1', 'hi'), { maxPending: 100, dedupWindowMs: 60_000 });
});
afterEach(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

const put = (chatKey: string, payload: unknown, headers: Record<string, string> = auth) =>
  ing.app.inject({
    method: 'PUT',
    url: `/v1/chats/${chatKey}/memory`,
    headers: { ...headers, 'content-type': 'application/json' },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });

/** Every key under the prefix with its value: proves a refused request wrote nothing. */
async function dump(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of await keysUnder(redis, prefix)) out[key] = await redis.dump(key);
  return out;
}

describe('GET/PUT /v1/chats/:chatKey/memory', () => {
  it('replaces and reads the memory document', async () => {
    const empty = await ing.app.inject({ method: 'GET', url: '/v1/chats/c1/memory', headers: auth });
    expect(empty.statusCode).toBe(200);
    expect(empty.json()).toMatchObject({ chatKey: 'c1', content: '', tokens: 0, maxTokens: 20 });

    const res = await put('c1', { content: 'prefers email' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ chatKey: 'c1', content: 'prefers email' });
    expect(await readMemory(ing.store, 'c1')).toBe('prefers email');
    const got = await ing.app.inject({ method: 'GET', url: '/v1/chats/c1/memory', headers: auth });
    expect(got.json().content).toBe('prefers email');
    const events = await ing.store.readEvents('c1', undefined, 20);
    expect(events.find((e) => e.type === 'memory.updated')?.data).toMatchObject({ by: 'operator' });

    expect((await put('c1', { content: '' })).statusCode).toBe(200);
    expect(await redis.exists(ing.store.keys('c1').memory)).toBe(0);
  });

  it('bad input is a 4xx with a registry code and writes nothing', async () => {
    const before = await dump();
    const cases: Array<[unknown, number, string, string?]> = [
      [{}, 400, 'VALIDATION_FAILED'],
      [{ content: 5 }, 400, 'VALIDATION_FAILED'],
      [{ content: 'x', extra: true }, 400, 'VALIDATION_FAILED'],
      ['{not json', 400, 'INVALID_JSON'],
      [{ content: 'word '.repeat(100) }, 400, 'MEMORY_TOO_LARGE'],
      [{ content: 'ok' }, 404, 'CHAT_NOT_FOUND', 'nobody'],
      [{ content: 'ok' }, 400, 'INVALID_CHAT_KEY', 'bad%20key%7B'],
    ];
    for (const [payload, status, code, chatKey] of cases) {
      const res = await put(chatKey ?? 'c1', payload);
      expect([res.statusCode, res.json().error?.code], JSON.stringify(payload)).toEqual([status, code]);
    }
    const unauthorized = await put('c1', { content: 'ok' }, {});
    expect([unauthorized.statusCode, unauthorized.json().error.code]).toEqual([401, 'UNAUTHORIZED']);
    expect(await dump()).toEqual(before);
  });
});

describe('docs/agent.md: the memory example', () => {
  it('runs as documented against a real ingress', async () => {
    const [command, documented] = docBlock('sh', '/memory').code.split('\n# ');
    const open = await testIngress(redis, prefix, { memoryMaxTokens: 1000 });
    try {
      await open.store.ingest('alice', userMessage('alice', 'a1', 'hi'), {
        maxPending: 100,
        dedupWindowMs: 60_000,
      });
      const base = await open.app.listen({ host: '127.0.0.1', port: 0 });
      // Async: the ingress answers from this process, so a sync child would block it.
      const script = command!.replaceAll('localhost:3000', base.replace('http://', ''));
      const { stdout: out } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], {
        timeout: 20_000,
      });
      expect(JSON.parse(out)).toEqual(JSON.parse(documented!.trim()));
      expect(await readMemory(open.store, 'alice')).toBe('Prefers answers in German. Vegetarian.');
    } finally {
      await open.close();
    }
  });
});
