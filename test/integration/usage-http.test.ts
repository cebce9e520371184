import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type PriceTable, parsePriceFile } from '../../src/shared/prices.js';
import { waitReady } from '../../src/shared/redis.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { userMessage } from '../helpers/messages.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;
const TOKEN = 'usage-test-token';
const auth = { authorization: `Bearer ${TOKEN}` };

function pricesOf(text: string): PriceTable {
  const table = parsePriceFile(text);
  if (typeof table === 'string') throw new Error(table);
  return table;
}
const prices = pricesOf(
  JSON.stringify({ models: { 'model-a': { input: 3, cached_input: 0.3, output: 15 } } }),
);

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('usagehttp');
});
afterEach(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

/** An ingress (with or without prices) and chat c1 with usage on two days and two models. */
async function start(opts: { priced?: boolean; budget?: number } = {}): Promise<void> {
  ing = await testIngress(redis, prefix, {
    apiToken: TOKEN,
    usage: {
      ...(opts.priced && { prices }),
      ...(opts.budget !== undefined && { dailyTokenBudget: opts.budget }),
    },
  });
  await queueMetaWritten(redis, prefix);
  await ing.store.ingest('c1', userMessage('c1', 'm1', 'hi'), { maxPending: 100, dedupWindowMs: 60_000 });
  await redis.hset(ing.store.keys('c1').usage, {
    '2026-03-01|model-a|input': 1_000_000,
    '2026-03-01|model-a|cached_input': 500_000,
    '2026-03-01|model-a|output': 100_000,
    '2026-03-01|model-a|calls': 10,
    '2026-03-01|total': 1_100_000,
    '2026-03-02|model-a|input': 2000,
    '2026-03-02|model-a|calls': 1,
    '2026-03-02|unlisted|input': 300,
    '2026-03-02|unlisted|output': 30,
    '2026-03-02|unlisted|calls': 1,
    '2026-03-02|total': 2330,
  });
}

const get = (url: string, headers: Record<string, string> = auth) =>
  ing.app.inject({ method: 'GET', url, headers });

describe('GET /v1/chats/:chatKey/usage', () => {
  it('sums the chat by model and by day', async () => {
    await start();
    const res = await get('/v1/chats/c1/usage');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      chatKey: 'c1',
      from: null,
      to: null,
      total: { calls: 12, inputTokens: 1_002_300, cachedInputTokens: 500_000, outputTokens: 100_030 },
    });
    expect(body.total.cost).toBeUndefined();
    expect(body.byModel.map((m: { model: string; calls: number }) => [m.model, m.calls])).toEqual([
      ['model-a', 11],
      ['unlisted', 1],
    ]);
    expect(body.byDay.map((d: { day: string; budgetTokens: number }) => [d.day, d.budgetTokens])).toEqual([
      ['2026-03-01', 1_100_000],
      ['2026-03-02', 2330],
    ]);
  });

  it('keeps to the days from and to name', async () => {
    await start();
    const body = (await get('/v1/chats/c1/usage?from=2026-03-02&to=2026-03-31')).json();
    expect(body).toMatchObject({
      from: '2026-03-02',
      to: '2026-03-31',
      total: { inputTokens: 2300, calls: 2 },
    });
    const before = (await get('/v1/chats/c1/usage?to=2026-03-01')).json();
    expect(before.byDay.map((d: { day: string }) => d.day)).toEqual(['2026-03-01']);
  });

  it('adds the cost with a price file, and names the models it has no price for', async () => {
    await start({ priced: true, budget: 5000 });
    const body = (await get('/v1/chats/c1/usage')).json();
    // 2026-03-01: 500k full-price input × $3 + 500k cached × $0.3 + 100k output × $15, per million.
    const first = 0.5 * 3 + 0.5 * 0.3 + 0.1 * 15;
    const second = (2000 * 3) / 1e6;
    expect(body.total.cost).toBeCloseTo(first + second, 10);
    expect(body.total.unpriced).toEqual(['unlisted']);
    expect(body.byModel.find((m: { model: string }) => m.model === 'unlisted').cost).toBeNull();
    expect(body.byDay[0].cost).toBeCloseTo(first, 10);
    expect(body.dailyTokenBudget).toBe(5000);
  });

  it('answers a chat without usage with zeros', async () => {
    await start();
    await ing.store.ingest('c2', userMessage('c2', 'm1', 'hi'), { maxPending: 100, dedupWindowMs: 60_000 });
    const body = (await get('/v1/chats/c2/usage')).json();
    expect(body).toMatchObject({ total: { calls: 0, inputTokens: 0 }, byModel: [], byDay: [] });
  });

  it.each([
    ['no token', '/v1/chats/c1/usage', {}, 401, 'UNAUTHORIZED'],
    ['a bad chat key', '/v1/chats/bad%7Bkey/usage', auth, 400, 'INVALID_CHAT_KEY'],
    ['a day that is not YYYY-MM-DD', '/v1/chats/c1/usage?from=2026-3-1', auth, 400, 'VALIDATION_FAILED'],
    ['a day that does not exist', '/v1/chats/c1/usage?to=2026-02-30', auth, 400, 'VALIDATION_FAILED'],
    ['from after to', '/v1/chats/c1/usage?from=2026-03-02&to=2026-03-01', auth, 400, 'VALIDATION_FAILED'],
    ['an unknown parameter', '/v1/chats/c1/usage?model=x', auth, 400, 'VALIDATION_FAILED'],
    ['a chat that does not exist', '/v1/chats/nobody/usage', auth, 404, 'CHAT_NOT_FOUND'],
  ] as const)('refuses %s', async (_what, url, headers, status, code) => {
    await start();
    const res = await get(url, headers);
    expect(res.statusCode).toBe(status);
    expect(res.json().error.code).toBe(code);
    expect(typeof res.json().error.message).toBe('string');
  });
});
