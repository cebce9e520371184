import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/shared/logger.js';
import { waitReady } from '../../src/shared/redis.js';
import { readArchive } from '../../src/shared/store/archive.js';
import { listContexts } from '../../src/shared/store/contexts.js';
import { compactChat } from '../../src/worker/compaction/compact.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { textOf } from '../helpers/messages.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';

/**
 * What ingest accepts must be exactly what every later stage can process: the Lua scripts
 * decode stored JSON with cjson, which refuses lone-surrogate escapes and more than 1000
 * levels of nesting. Each hostile message goes in over HTTP; then turns commit the chat and
 * a compaction — the stage that used to fail for good — runs on it.
 */

const ingressRedis = testRedis('ingress');
const redis = testRedis();
let prefix: string;
let ing: TestIngress;

beforeAll(() => waitReady(ingressRedis));
beforeEach(async () => {
  prefix = randomPrefix('hostile-in');
  ing = await testIngress(ingressRedis, prefix);
});
afterEach(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => {
  ingressRedis.disconnect();
  redis.disconnect();
});

const post = (chatKey: string, payload: string) =>
  ing.app.inject({
    method: 'POST',
    url: `/v1/chats/${chatKey}/messages`,
    headers: { 'content-type': 'application/json' },
    payload,
  });

const nested = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

const chatKeysWritten = async () => (await keysUnder(redis, prefix)).filter((k) => k.includes(':{c:'));

async function answerAll(chatKey: string) {
  const deps = turnDeps(redis, prefix, scriptedModel().model);
  for (let i = 0; i < 10 && (await deps.store.pendingCount(chatKey)) > 0; i++) await runTurn(deps, chatKey);
  expect(await deps.store.pendingCount(chatKey)).toBe(0);
}

async function compact(chatKey: string) {
  const { model } = scriptedModel(() => ({ text: '## Goals and requests\n- none' }));
  return compactChat(
    {
      store: ing.store,
      model,
      modelName: 'scripted',
      logger: silentLogger(),
      settings: {
        keepLast: 2,
        keepRecentTokens: 0,
        maxOutputTokens: 200,
        archive: true,
        maxEvents: 100,
        maxCharsPerMessage: 4000,
      },
    },
    chatKey,
  );
}

describe('lone surrogates are stored as U+FFFD, so the chat still compacts', () => {
  it('in text, username and extra (keys and values)', async () => {
    // Raw JSON escapes: JSON.parse turns each into a lone surrogate.
    const res = await post(
      'c1',
      '{"id":"m1","text":"a\\ud800b\\udc00c","metadata":{"username":"\\udfffx","extra":{"k\\ud801":"v\\udbff"}}}',
    );
    expect(res.statusCode).toBe(202);
    for (let i = 2; i <= 4; i++)
      expect((await post('c1', `{"id":"m${i}","text":"hello ${i}"}`)).statusCode).toBe(202);

    const [stored] = await ing.store.readAllPending('c1');
    expect(textOf(stored!)).toBe('a\ufffdb\ufffdc');
    expect(stored!.metadata.username).toBe('\ufffdx');
    expect(stored!.metadata.extra).toEqual({ 'k\ufffd': 'v\ufffd' });

    await answerAll('c1');
    // The surrogate message heads the history: compact.lua decodes exactly that one.
    expect(await compact('c1')).toMatchObject({ status: 'applied' });
    const [entry] = await readArchive(ing.store, 'c1', undefined, 10);
    expect(textOf(entry!.entry.messages[0]!)).toBe('a\ufffdb\ufffdc');
  });

  it('in a context title an operator sends', async () => {
    expect((await post('c2', '{"text":"first"}')).statusCode).toBe(202);
    await answerAll('c2');
    const res = await ing.app.inject({
      method: 'POST',
      url: '/v1/chats/c2/contexts',
      headers: { 'content-type': 'application/json' },
      payload: '{"action":"new","title":"old \\ud800 topic"}',
    });
    expect(res.statusCode).toBe(200);
    const [meta] = await listContexts(ing.store, 'c2', 10);
    expect(meta!.title).toBe('old \ufffd topic');
  });
});

describe('nesting is bounded at ingest, with a 400 — never a 503', () => {
  const cases: Array<[string, string, RegExp]> = [
    [
      'extra nested 9 levels',
      `{"text":"x","metadata":{"extra":${nested(9)}}}`,
      /^metadata\.extra: nested deeper than 8/,
    ],
    [
      'extra nested 1,100 levels (past cjson)',
      `{"text":"x","metadata":{"extra":${nested(1100)}}}`,
      /^body: JSON nested deeper than 64/,
    ],
    [
      'a body nested 4,100 levels',
      `{"text":"x","metadata":{"extra":${nested(4100)}}}`,
      /^body: JSON nested deeper than 64/,
    ],
    [
      'a body nested 50,000 levels',
      `[${'['.repeat(50_000)}${']'.repeat(50_000)}]`,
      /^body: JSON nested deeper than 64/,
    ],
    [
      'extra over 16 KiB',
      `{"text":"x","metadata":{"extra":{"k":"${'y'.repeat(17_000)}"}}}`,
      /^metadata\.extra: larger than 16384/,
    ],
  ];
  for (const [name, payload, message] of cases) {
    it(`answers 400 VALIDATION_FAILED for ${name} and writes nothing`, async () => {
      const res = await post('c3', payload);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({
        code: 'VALIDATION_FAILED',
        message: expect.stringMatching(message),
      });
      expect(await chatKeysWritten()).toEqual([]);
    });
  }

  it('accepts extra at the limit, and the chat compacts with it', async () => {
    const res = await post('c4', `{"id":"deep","text":"x","metadata":{"extra":${nested(8)}}}`);
    expect(res.statusCode).toBe(202);
    for (let i = 0; i < 3; i++) expect((await post('c4', `{"text":"more ${i}"}`)).statusCode).toBe(202);
    await answerAll('c4');
    expect(await compact('c4')).toMatchObject({ status: 'applied' });
  });
});
