import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { LuaScript, scripts } from '../../src/shared/store/scripts.js';
import { assistantMessage, textOf, userMessage } from '../helpers/messages.js';
import { deleteLabel, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';
import { holdLeases } from '../helpers/turn-deps.js';

const redis = testRedis();
let prefix: string;
let store: ChatStore;
const limits = { maxPending: 3, dedupWindowMs: 60_000 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeEach(async () => {
  prefix = randomPrefix('store');
  store = new ChatStore(redis, { prefix, maxEvents: 100 });
});
afterAll(async () => {
  await deleteLabel(redis, 'store');
  redis.disconnect();
});

describe('ingest', () => {
  it('accepts a message once and answers duplicate for the same id', async () => {
    const m = userMessage('c1', 'm1', 'hello');
    expect((await store.ingest('c1', m, limits)).status).toBe('accepted');
    expect(await store.ingest('c1', { ...m, parts: [{ type: 'text', text: 'changed' }] }, limits)).toEqual({
      status: 'duplicate',
    });
    const pending = await store.readAllPending('c1');
    expect(pending.map(textOf)).toEqual(['hello']);
  });

  it('refuses a message when the chat already has the maximum pending', async () => {
    for (const id of ['a', 'b', 'c']) await store.ingest('c1', userMessage('c1', id, id), limits);
    expect(await store.ingest('c1', userMessage('c1', 'd', 'd'), limits)).toEqual({
      status: 'full',
      pending: 3,
    });
    expect(await store.pendingCount('c1')).toBe(3);
  });

  it('keeps every key of a chat under its hash tag', async () => {
    await store.ingest('room:1', userMessage('room:1', 'm1', 'x'), limits);
    const lease = await store.acquire('room:1', 'w1', 1000);
    expect(lease.ok).toBe(true);
    const keys = await keysUnder(redis, prefix);
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) expect(key.startsWith(`${prefix}:{c:room:1}:`)).toBe(true);
  });
});

describe('lease and fence', () => {
  it('answers busy with the remaining lease while another owner holds the chat', async () => {
    expect((await store.acquire('c1', 'w1', 5000)).ok).toBe(true);
    const second = await store.acquire('c1', 'w2', 5000);
    expect(second.ok).toBe(false);
    if (!second.ok) expect(second.ttlMs).toBeGreaterThan(4000);
  });

  it("renews many chats' leases in one call, each iff its fence holds: a lost one is refused and recorded, the others renewed", async () => {
    const held = await holdLeases(store, ['r1', 'r2', 'r3']);
    // r2's lease ran out and another worker took the chat.
    await redis.hset(store.keys('r2').meta, 'leaseUntil', 0);
    expect((await store.acquire('r2', 'other', 60_000)).ok).toBe(true);
    const calls = vi.spyOn(scripts.renewMany, 'run');
    expect(await store.renewMany(held)).toEqual([true, false, true]);
    expect(calls).toHaveBeenCalledTimes(1);
    for (const chatKey of ['r1', 'r3']) {
      expect(Number((await store.readMeta(chatKey)).leaseUntil)).toBeGreaterThan(Date.now() + 50_000);
    }
    expect((await store.readEvents('r2', undefined, 10)).map((e) => e.type)).toContain('fence.rejected');
    expect((await store.readEvents('r1', undefined, 10)).map((e) => e.type)).not.toContain('fence.rejected');
  });

  it('a script Redis has not cached (restart, failover) runs by EVAL with the same keys and arguments', async () => {
    const lease = await store.acquire('c1', 'w1', 1000);
    if (!lease.ok) throw new Error('acquire failed');
    const k = store.keys('c1');
    const uncached = new LuaScript('renew', 2, { events: true });
    Object.defineProperty(uncached, 'sha', { value: 'f'.repeat(40) });
    const renew = (script: LuaScript<true>, owner: string) =>
      script.run(redis, [k.meta, k.events], [owner, lease.fence, 60_000, 100, 'run-1'], undefined);
    expect(await renew(uncached, 'w1')).toBe(1);
    expect(Number(await redis.hget(k.meta, 'leaseUntil')) - Date.now()).toBeGreaterThan(30_000);
    expect(await renew(uncached, 'w2')).toBe(0);
    expect(await renew(scripts.renew, 'w1')).toBe(1);
    expect(await renew(scripts.renew, 'w2')).toBe(0);
  });

  it('hands the chat to a new owner with a higher fence once the lease ran out, and records the takeover', async () => {
    const a = await store.acquire('c1', 'w1', 100);
    await sleep(150);
    const b = await store.acquire('c1', 'w2', 5000);
    expect(a.ok && b.ok && Number(b.fence) > Number(a.fence)).toBe(true);
    const events = await store.readEvents('c1', undefined, 10);
    expect(events.map((e) => e.type)).toContain('lease.takeover');
  });

  it('a stale owner can neither commit, send, renew nor finish, and each refusal is an event', async () => {
    await store.ingest('c1', userMessage('c1', 'm1', 'hi'), limits);
    const [entry] = await store.readInbox('c1', 10);
    const a = await store.acquire('c1', 'w1', 100);
    await sleep(150);
    const b = await store.acquire('c1', 'w2', 5000);
    if (!a.ok || !b.ok) throw new Error('acquire failed');

    const commit = await store.commit('c1', a.fence, {
      runId: 'r1',
      consumed: [entry!.streamId],
      messages: [entry!.message, assistantMessage('c1', 'a1', 'late answer')],
    });
    expect(commit).toMatchObject({ ok: false, reason: 'fenced-out' });
    expect((await store.sendOutbox('c1', a.fence, { runId: 'r1', text: 'late', ts: 1 })).ok).toBe(false);
    expect(await store.renew('c1', 'w1', a.fence, 1000, 'r1')).toBe(false);
    expect((await store.finish('c1', a.fence, 'w1', 'r1')).ok).toBe(false);

    expect(await store.readHistory('c1')).toEqual([]);
    expect(await store.readOutbox('c1', undefined, 10)).toEqual([]);
    expect(await store.pendingCount('c1')).toBe(1);
    const rejected = (await store.readEvents('c1', undefined, 50)).filter((e) => e.type === 'fence.rejected');
    expect(rejected.map((e) => e.data.op)).toEqual(['commit', 'outbox', 'renew', 'finish']);
    // The new owner still holds the lease.
    expect((await store.acquire('c1', 'w3', 1000)).ok).toBe(false);
  });

  it('commit appends in order, consumes the inbox entries and counts tokens', async () => {
    await store.ingest('c1', userMessage('c1', 'm1', 'one'), limits);
    await store.ingest('c1', userMessage('c1', 'm2', 'two'), limits);
    const entries = await store.readInbox('c1', 10);
    const lease = await store.acquire('c1', 'w1', 5000);
    if (!lease.ok) throw new Error('busy');
    const msgs = [
      { ...entries[0]!.message, metadata: { ...entries[0]!.message.metadata, tokens: 5 } },
      { ...entries[1]!.message, metadata: { ...entries[1]!.message.metadata, tokens: 6 } },
      assistantMessage('c1', 'a1', 'answer', { tokens: 7 }),
    ];
    const res = await store.commit('c1', lease.fence, {
      runId: 'r1',
      consumed: entries.map((e) => e.streamId),
      messages: msgs,
    });
    expect(res).toEqual({ ok: true, histLen: 3, tokens: 18, released: false, pending: 0, cards: 0 });
    expect((await store.readHistory('c1')).map(textOf)).toEqual(['one', 'two', 'answer']);
    expect(await store.pendingCount('c1')).toBe(0);
    // Without the owner the commit keeps the lease: another worker finds the chat busy.
    expect((await store.acquire('c1', 'w2', 5000)).ok).toBe(false);
    expect(await store.finish('c1', lease.fence, 'w1', 'r1')).toEqual({ ok: true, pending: 0 });
  });

  it('commit with the owner releases the lease in the same script and counts what is still pending', async () => {
    for (const id of ['m1', 'm2', 'm3']) await store.ingest('c1', userMessage('c1', id, id), limits);
    const [first] = await store.readInbox('c1', 1);
    const lease = await store.acquire('c1', 'w1', 5000);
    if (!lease.ok) throw new Error('busy');
    const res = await store.commit('c1', lease.fence, {
      runId: 'r1',
      consumed: [first!.streamId],
      messages: [first!.message],
      releaseAs: 'w1',
    });
    expect(res).toMatchObject({ ok: true, histLen: 1, released: true, pending: 2 });
    // Released: the next turn takes the chat at once.
    const next = await store.acquire('c1', 'w2', 5000);
    expect(next.ok).toBe(true);
    const types = (await store.readEvents('c1', undefined, 50)).map((e) => e.type);
    expect(types).not.toContain('fence.rejected');
    expect(types).not.toContain('lease.takeover');
  });

  it("a finish after the commit released the lease is a no-op, not a rejection; a later turn's lease is left alone", async () => {
    await store.ingest('c1', userMessage('c1', 'm1', 'one'), limits);
    const [entry] = await store.readInbox('c1', 1);
    const lease = await store.acquire('c1', 'w1', 5000);
    if (!lease.ok) throw new Error('busy');
    const turn = { runId: 'r1', consumed: [entry!.streamId], messages: [entry!.message], releaseAs: 'w1' };
    expect(await store.commit('c1', lease.fence, turn)).toMatchObject({ ok: true, released: true });
    expect(await store.finish('c1', lease.fence, 'w1', 'r1')).toEqual({ ok: true, pending: 0 });
    expect((await store.readEvents('c1', undefined, 50)).map((e) => e.type)).not.toContain('fence.rejected');
    // Once another turn holds the chat, the old fence's finish is refused and releases nothing.
    expect((await store.acquire('c1', 'w2', 5000)).ok).toBe(true);
    expect(await store.finish('c1', lease.fence, 'w1', 'r1')).toEqual({ ok: false, pending: 0 });
    expect((await store.acquire('c1', 'w3', 5000)).ok).toBe(false);
  });

  it('refuses to commit an inbox entry that was already consumed, writing nothing', async () => {
    await store.ingest('c1', userMessage('c1', 'm1', 'one'), limits);
    const [entry] = await store.readInbox('c1', 10);
    const lease = await store.acquire('c1', 'w1', 5000);
    if (!lease.ok) throw new Error('busy');
    const turn = { runId: 'r1', consumed: [entry!.streamId], messages: [entry!.message] };
    expect((await store.commit('c1', lease.fence, turn)).ok).toBe(true);
    expect(await store.commit('c1', lease.fence, turn)).toMatchObject({ ok: false, reason: 'missing' });
    expect(await store.readHistory('c1')).toHaveLength(1);
  });
});

/** A compacted history: the summary `s`, then `count` user messages u0, u1, ... */
async function writeSummarizedHistory(chatKey: string, count: number): Promise<void> {
  const summary = assistantMessage(chatKey, 's', 'summary', { kind: 'summary' });
  await redis.rpush(
    store.keys(chatKey).hist,
    JSON.stringify(summary),
    ...Array.from({ length: count }, (_, i) => JSON.stringify(userMessage(chatKey, `u${i}`, `m${i}`))),
  );
}

describe('acquire reads the turn input with the lease', () => {
  const reads = { windowMessages: 3, maxPending: 2 };

  it('returns the history window (summary at the head), the oldest pending, memory and route with the fence', async () => {
    await writeSummarizedHistory('c1', 5);
    for (const id of ['p1', 'p2', 'p3']) {
      await store.ingest(
        'c1',
        userMessage('c1', id, id),
        { ...limits, maxPending: 10 },
        {
          channel: 'telegram',
          threadId: '42',
        },
      );
    }
    await redis.set(store.keys('c1').memory, 'likes tea');
    const lease = await store.acquire('c1', 'w1', 5000, reads);
    if (!lease.ok) throw new Error('acquire failed');
    expect(lease.fence).toBe('1');
    expect(JSON.parse(lease.route ?? '')).toMatchObject({ channel: 'telegram', threadId: '42' });
    expect(lease.input.window.total).toBe(6);
    expect(lease.input.window.summary?.id).toBe('s');
    expect(lease.input.window.messages.map((m) => m.id)).toEqual(['u2', 'u3', 'u4']);
    expect(lease.input.pending.map((e) => textOf(e.message))).toEqual(['p1', 'p2']);
    expect(lease.input.memory).toBe('likes tea');
    expect(lease.input).toMatchObject({ archived: 0, contexts: 0 });
    // The same as a separate read of the same sizes.
    expect(lease.input).toEqual(await store.readTurnInput('c1', reads.windowMessages, reads.maxPending));
  });

  it('counts the archive entries and archived contexts (which tools the turn offers), like a separate read', async () => {
    await writeSummarizedHistory('c1', 2);
    await store.ingest('c1', userMessage('c1', 'p1', 'p1'), limits);
    await redis.rpush(store.keys('c1').archive, '{}', '{}');
    await redis.hset(
      store.keys('c1').contexts,
      'ctx-000000000001',
      '{}',
      'ctx-000000000002',
      '{}',
      'ctx-000000000003',
      '{}',
    );
    const lease = await store.acquire('c1', 'w1', 5000, reads);
    if (!lease.ok) throw new Error('acquire failed');
    expect(lease.input).toMatchObject({ archived: 2, contexts: 3, window: { total: 3 } });
    expect(lease.input).toEqual(await store.readTurnInput('c1', reads.windowMessages, reads.maxPending));
  });

  it('a new chat: no route, empty history and memory; busy reads nothing', async () => {
    await store.ingest('c1', userMessage('c1', 'p1', 'first'), limits);
    const lease = await store.acquire('c1', 'w1', 5000, reads);
    if (!lease.ok) throw new Error('acquire failed');
    expect(lease.route).toBeUndefined();
    expect(lease.input).toMatchObject({
      window: { total: 0, messages: [] },
      memory: undefined,
      archived: 0,
      contexts: 0,
    });
    expect(lease.input.window.summary).toBeUndefined();
    expect(lease.input.pending.map((e) => e.message.id)).toEqual(['p1']);
    expect(await store.acquire('c1', 'w2', 5000, reads)).toMatchObject({ ok: false });
  });

  it('without reads, takes only the lease', async () => {
    await redis.rpush(store.keys('c1').hist, JSON.stringify(userMessage('c1', 'u0', 'm0')));
    await store.ingest('c1', userMessage('c1', 'p1', 'first'), limits);
    const lease = await store.acquire('c1', 'w1', 5000);
    if (!lease.ok) throw new Error('acquire failed');
    expect(lease.input.window.messages).toEqual([]);
    expect(lease.input.pending).toEqual([]);
  });
});

describe('history window', () => {
  it('returns the newest messages plus a summary at the head when the window does not reach it', async () => {
    await writeSummarizedHistory('c1', 10);
    const win = await store.readHistoryWindow('c1', 3);
    expect(win.total).toBe(11);
    expect(win.summary?.id).toBe('s');
    expect(win.messages.map((m) => m.id)).toEqual(['u7', 'u8', 'u9']);
    const all = await store.readHistoryWindow('c1', 50);
    expect(all.summary).toBeUndefined();
    expect(all.messages[0]!.id).toBe('s');
  });
});

describe('outbox', () => {
  it("says whether a message came after the sender's last seen one, so its turn can skip the next inbox read", async () => {
    await store.ingest('c1', userMessage('c1', 'm1', 'hi'), limits);
    const [first] = await store.readInbox('c1', 10);
    const lease = await store.acquire('c1', 'w1', 5000);
    if (!lease.ok) throw new Error('acquire failed');
    const send = (text: string, seen: string | null = first!.streamId) =>
      store.sendOutbox('c1', lease.fence, { runId: 'r1', text, ts: 1, ...(seen !== null && { seen }) });

    const quiet = await send('a');
    expect(quiet).toMatchObject({ ok: true, arrived: false });
    // Without `seen` (a failure notice) the write knows nothing of the inbox: a read is due,
    // even with nothing new in it.
    expect(await send('c', null)).toMatchObject({ ok: true, arrived: true });
    await store.ingest('c1', userMessage('c1', 'm2', 'more'), limits);
    expect(await send('b')).toMatchObject({ ok: true, arrived: true });
    // A resent write (its first answer lost) answers the same way.
    expect(await send('a')).toMatchObject({ ok: true, id: quiet.ok ? quiet.id : '', arrived: true });
  });

  it('writes the reply entries it is given with the item, once: a resent write and a fenced-out one add none', async () => {
    await store.ingest('c1', userMessage('c1', 'm1', 'hi'), limits);
    const lease = await store.acquire('c1', 'w1', 5000);
    if (!lease.ok) throw new Error('acquire failed');
    const replies = new ReplyStreams(redis, { prefix, maxEvents: 100, maxLen: 100, ttlMs: 60_000 });
    const tail = replies.tail('c1', 'r1', [
      ['c', JSON.stringify({ type: 'text-start', id: 'call-1' })],
      ['c', JSON.stringify({ type: 'text-delta', id: 'call-1', delta: 'hello' })],
    ]);
    const send = (fence: string) =>
      store.sendOutbox('c1', fence, {
        runId: 'r1',
        text: 'hello',
        ts: 1,
        seen: '0-0',
        part: 'call-1',
        reply: tail,
      });
    const written = await send(lease.fence);
    expect(written).toMatchObject({ ok: true, stop: false });
    const entries = async () =>
      (await replies.read('c1', 'r1')).map((e) => (e.kind === 'chunk' ? e.chunk.type : ''));
    expect(await entries()).toEqual(['text-start', 'text-delta']);
    expect(await redis.pttl(tail.key)).toBeGreaterThan(50_000);
    expect(await send(lease.fence)).toMatchObject({ ok: true, id: written.ok ? written.id : '' });
    expect(await send('999')).toMatchObject({ ok: false });
    expect(await entries()).toEqual(['text-start', 'text-delta']);
    expect((await store.readOutbox('c1', undefined, 10)).map((i) => i.text)).toEqual(['hello']);
  });
});
