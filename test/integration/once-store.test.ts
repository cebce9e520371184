import { afterAll, describe, expect, it } from 'vitest';
import { allChatKeys } from '../../src/shared/keys.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { beginOnce, endOnce, type OnceLimits } from '../../src/shared/store/once.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * once.lua on real Redis (docs/design.md §4, "once"): a result stored under the chat's fence
 * answers every later call; a `run` record left by a fn that never stored counts its attempts;
 * a stale fence writes nothing; records are kept for a time and a number per chat.
 */

const redis = testRedis();
const LABEL = 'oncestore';
const limits: OnceLimits = { maxBytes: 1000, maxKeys: 3, keepMs: 60_000 };

afterAll(async () => {
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

async function chat() {
  const store = new ChatStore(redis, { prefix: randomPrefix(LABEL), maxEvents: 100 });
  const lease = await store.acquire('c1', 'w1', 10_000);
  if (!lease.ok) throw new Error('busy');
  return { store, fence: lease.fence, k: store.keys('c1') };
}

const call = (fence: string, key = 'refund:42', runId = 'run-1') => ({ fence, runId, key });

describe('once.lua', () => {
  it('runs fn on the first call, then answers every call with the stored result, fn not run again', async () => {
    const { store, fence } = await chat();
    expect(await beginOnce(store, 'c1', call(fence), limits)).toEqual({ status: 'run', attempt: 1 });
    const ended = await endOnce(
      store,
      'c1',
      { ...call(fence), json: '{"refund":"r-1"}', refused: undefined },
      limits,
    );
    expect(ended).toMatchObject({ status: 'stored', result: { attempt: 1, json: '{"refund":"r-1"}' } });
    const again = await beginOnce(store, 'c1', call(fence, 'refund:42', 'run-2'), limits);
    expect(again).toEqual({
      status: 'done',
      result: { attempt: 1, runId: 'run-1', json: '{"refund":"r-1"}', refused: undefined },
    });
    const events = await store.readEvents('c1', undefined, 20);
    expect(events.filter((e) => e.type.startsWith('once.')).map((e) => [e.type, e.data.key])).toEqual([
      ['once.stored', 'refund:42'],
      ['once.reused', 'refund:42'],
    ]);
  });

  it('a fn that never stored (its worker died) runs again as the next attempt; an earlier stored result stands over a later end', async () => {
    const { store, fence, k } = await chat();
    await beginOnce(store, 'c1', call(fence), limits);
    // The worker died here; the turn taking the chat over has the next fence (acquire.lua's += 1).
    const next = String(await redis.hincrby(k.meta, 'fence', 1));
    expect(await beginOnce(store, 'c1', call(next, 'refund:42', 'run-2'), limits)).toEqual({
      status: 'run',
      attempt: 2,
    });
    await endOnce(
      store,
      'c1',
      { ...call(next, 'refund:42', 'run-2'), json: '1', refused: undefined },
      limits,
    );
    const late = await endOnce(store, 'c1', { ...call(next), json: '2', refused: undefined }, limits);
    expect(late).toMatchObject({ status: 'done', result: { attempt: 2, json: '1', runId: 'run-2' } });
  });

  it('refuses a stale fence in either step and writes nothing but fence.rejected', async () => {
    const { store, fence, k } = await chat();
    await redis.hincrby(k.meta, 'fence', 1);
    expect(await beginOnce(store, 'c1', call(fence), limits)).toEqual({ status: 'fenced-out' });
    expect(await endOnce(store, 'c1', { ...call(fence), json: '1', refused: undefined }, limits)).toEqual({
      status: 'fenced-out',
    });
    expect(await redis.exists(k.once, k.onceAt)).toBe(0);
    const rejected = (await store.readEvents('c1', undefined, 20)).filter((e) => e.type === 'fence.rejected');
    expect(rejected.map((e) => e.data.op)).toEqual(['once', 'once']);
  });

  it('keeps at most maxKeys keys per chat, dropping the one written longest ago', async () => {
    const { store, fence, k } = await chat();
    for (const key of ['a', 'b', 'c', 'd']) {
      await beginOnce(store, 'c1', call(fence, key), limits);
      await endOnce(store, 'c1', { ...call(fence, key), json: `"${key}"`, refused: undefined }, limits);
    }
    expect((await redis.hkeys(k.once)).sort()).toEqual(['b', 'c', 'd']);
    expect(await redis.zcard(k.onceAt)).toBe(3);
    // The forgotten key runs again: the cap bounds memory, and the guarantee with it.
    expect(await beginOnce(store, 'c1', call(fence, 'a'), limits)).toEqual({ status: 'run', attempt: 1 });
  });

  it('drops records not written for keepMs, and both keys expire keepMs after the last write', async () => {
    const { store, fence, k } = await chat();
    const short = { ...limits, keepMs: 300 };
    await beginOnce(store, 'c1', call(fence, 'old'), short);
    await endOnce(store, 'c1', { ...call(fence, 'old'), json: '1', refused: undefined }, short);
    expect(await redis.pttl(k.once)).toBeGreaterThan(0);
    expect(await redis.pttl(k.once)).toBeLessThanOrEqual(300);
    await new Promise((r) => setTimeout(r, 400));
    await redis.hset(k.once, 'stray', 'x');
    await redis.zadd(k.onceAt, 1, 'stray');
    expect(await beginOnce(store, 'c1', call(fence, 'new'), limits)).toEqual({ status: 'run', attempt: 1 });
    expect(await redis.hkeys(k.once)).toEqual(['new']);
  });

  it('stores why a result was not kept: fn ran, and the key answers with that, not with another run', async () => {
    const { store, fence } = await chat();
    await beginOnce(store, 'c1', call(fence), limits);
    await endOnce(store, 'c1', { ...call(fence), json: undefined, refused: 'too large' }, limits);
    expect(await beginOnce(store, 'c1', call(fence), limits)).toMatchObject({
      status: 'done',
      result: { json: undefined, refused: 'too large' },
    });
  });

  it('checks what it reads back: a record that is not one is an error, never a result', async () => {
    const { store, fence, k } = await chat();
    await redis.hset(k.once, 'refund:42', JSON.stringify({ s: 'done', n: 'one', f: fence }));
    await expect(beginOnce(store, 'c1', call(fence), limits)).rejects.toThrow();
  });

  it("is deleted with the chat: both keys are among the chat's keys", () => {
    const keys = allChatKeys('p', 'c1', []);
    expect(keys).toContain('p:{c:c1}:once');
    expect(keys).toContain('p:{c:c1}:onceAt');
  });
});
