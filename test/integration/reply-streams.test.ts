import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { type ReplyEntry, ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { userMessage } from '../helpers/messages.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

/** The reply streams' fenced scripts against a real Redis: who may write, and what a takeover closes. */

const redis = testRedis();
const prefix = randomPrefix('replies');
const store = new ChatStore(redis, { prefix, maxEvents: 100 });
const replies = new ReplyStreams(redis, { prefix, maxEvents: 100, maxLen: 50, ttlMs: 60_000 });

beforeAll(() => waitReady(redis));
afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

const chunk = (c: object): ['c', string] => ['c', JSON.stringify(c)];
const reply = (chatKey: string, runId: string, text: string): ChatMessage => ({
  id: `${runId}-a0`,
  role: 'assistant',
  parts: [{ type: 'text', text }],
  metadata: { ts: Date.now(), chatKey, runId, kind: 'normal' },
});
const types = (entries: ReplyEntry[]) => entries.map((e) => (e.kind === 'chunk' ? e.chunk.type : 'answers'));

/** Take the chat's lease (a new fence); `expiring`: it runs out at once, so the next acquire takes over. */
async function takeFence(chatKey: string, owner: string, expiring = false): Promise<string> {
  const res = await store.acquire(chatKey, owner, expiring ? 1 : 60_000);
  if (!res.ok) throw new Error('busy');
  if (expiring) await new Promise((r) => setTimeout(r, 10));
  return res.fence;
}

describe('reply-write.lua', () => {
  it('a takeover opening its reply closes the half reply with abort; the old turn’s later writes are refused and add nothing', async () => {
    const old = await takeFence('take', 'w1:run-a', true);
    expect(
      await replies.write('take', old, 'run-a', 'open', [['m', '["m1"]'], chunk({ type: 'start' })]),
    ).toBe('ok');
    await replies.write('take', old, 'run-a', 'append', [chunk({ type: 'text-start', id: 't' })]);
    expect(await replies.openRun('take')).toBe('run-a');

    const fence = await takeFence('take', 'w2:run-b');
    expect(
      await replies.write('take', fence, 'run-b', 'open', [['m', '["m1"]'], chunk({ type: 'start' })], {
        type: 'reply.started',
        data: { runId: 'run-b', messageIds: ['m1'] },
      }),
    ).toBe('ok');
    expect(types(await replies.read('take', 'run-a'))).toEqual(['answers', 'start', 'text-start', 'abort']);
    expect(await replies.openRun('take')).toBe('run-b');

    // The zombie writes on: refused, nothing appended to either stream.
    expect(
      await replies.write('take', old, 'run-a', 'append', [
        chunk({ type: 'text-delta', id: 't', delta: 'x' }),
      ]),
    ).toBe('fenced-out');
    expect(await replies.write('take', old, 'run-a', 'close', [chunk({ type: 'finish' })])).toBe(
      'fenced-out',
    );
    expect(types(await replies.read('take', 'run-a'))).toEqual(['answers', 'start', 'text-start', 'abort']);
    expect(types(await replies.read('take', 'run-b'))).toEqual(['answers', 'start']);
    expect(await replies.openRun('take')).toBe('run-b');
    const events = await store.readEvents('take', undefined, 50);
    expect(events.find((e) => e.type === 'reply.started')?.data).toEqual({
      runId: 'run-b',
      messageIds: ['m1'],
    });
  });

  it('close ends the reply: nothing is open any more, and the stream expires', async () => {
    const fence = await takeFence('close', 'w1:run-c');
    await replies.write('close', fence, 'run-c', 'open', [chunk({ type: 'start' })]);
    expect(await replies.liveRun('close')).toBe('run-c');
    await replies.write('close', fence, 'run-c', 'close', [chunk({ type: 'finish' })]);
    expect(await replies.openRun('close')).toBeUndefined();
    expect(await replies.liveRun('close')).toBeUndefined();
    const ttl = await redis.pttl(replies.key('close', 'run-c'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('a reply stream is bounded: a long reply keeps about its newest maxLen chunks', async () => {
    const fence = await takeFence('long', 'w1:run-d');
    await replies.write('long', fence, 'run-d', 'open', [chunk({ type: 'start' })]);
    for (let i = 0; i < 20; i++) {
      const deltas = Array.from({ length: 20 }, (_, j) =>
        chunk({ type: 'text-delta', id: 't', delta: `${i}.${j}` }),
      );
      await replies.write('long', fence, 'run-d', 'append', deltas);
    }
    const len = await redis.xlen(replies.key('long', 'run-d'));
    expect(len).toBeLessThan(401);
    expect(len).toBeGreaterThanOrEqual(50);
  });

  it('a stop request reaches the running turn at its next write; a chat with no turn is idle and nothing is written', async () => {
    expect(await replies.requestStop('stop-idle')).toBe('idle');
    expect(await redis.exists(`${prefix}:{c:stop-idle}:meta`, `${prefix}:{c:stop-idle}:events`)).toBe(0);

    const fence = await takeFence('stop', 'w1:run-e');
    await replies.write('stop', fence, 'run-e', 'open', [chunk({ type: 'start' })]);
    expect(await replies.requestStop('stop')).toBe('stopping');
    expect(
      await replies.write('stop', fence, 'run-e', 'append', [chunk({ type: 'text-start', id: 't' })]),
    ).toBe('stop');
    // A later turn (new fence) is not stopped by the old request.
    await store.finish('stop', fence, 'w1:run-e', 'run-e');
    const next = await takeFence('stop', 'w1:run-f');
    expect(await replies.write('stop', next, 'run-f', 'open', [chunk({ type: 'start' })])).toBe('ok');
  });

  it('a commit closes its reply in the same script: the last chunks and finish land with the history, the lease goes, nothing stays open', async () => {
    await store.ingest('commit', userMessage('commit', 'm1', 'hi'), {
      maxPending: 10,
      dedupWindowMs: 60_000,
    });
    const [entry] = await store.readInbox('commit', 10);
    const fence = await takeFence('commit', 'w1:run-g');
    await replies.write('commit', fence, 'run-g', 'open', [['m', '["m1"]'], chunk({ type: 'start' })]);
    const last = [chunk({ type: 'text-delta', id: 't', delta: 'the end' }), chunk({ type: 'finish' })];
    const committed = await store.commit('commit', fence, {
      runId: 'run-g',
      consumed: [entry!.streamId],
      messages: [reply('commit', 'run-g', 'the end')],
      releaseAs: 'w1:run-g',
      reply: replies.tail('commit', 'run-g', last),
    });
    expect(committed).toMatchObject({ ok: true, released: true, pending: 0 });
    expect(types(await replies.read('commit', 'run-g'))).toEqual([
      'answers',
      'start',
      'text-delta',
      'finish',
    ]);
    expect(await replies.openRun('commit')).toBeUndefined();
    expect(await redis.pttl(replies.key('commit', 'run-g'))).toBeGreaterThan(0);
    expect((await store.readHistory('commit')).map((m) => m.id)).toEqual(['run-g-a0']);
    expect(await store.pendingCount('commit')).toBe(0);
  });

  it('a fenced-out commit writes none of its reply: a takeover owns what clients see', async () => {
    await store.ingest('zombie', userMessage('zombie', 'm1', 'hi'), {
      maxPending: 10,
      dedupWindowMs: 60_000,
    });
    const [entry] = await store.readInbox('zombie', 10);
    const old = await takeFence('zombie', 'w1:run-h', true);
    await replies.write('zombie', old, 'run-h', 'open', [chunk({ type: 'start' })]);
    await takeFence('zombie', 'w2:run-i');
    const committed = await store.commit('zombie', old, {
      runId: 'run-h',
      consumed: [entry!.streamId],
      messages: [reply('zombie', 'run-h', 'late')],
      releaseAs: 'w1:run-h',
      reply: replies.tail('zombie', 'run-h', [chunk({ type: 'finish' })]),
    });
    expect(committed).toMatchObject({ ok: false, reason: 'fenced-out' });
    expect(types(await replies.read('zombie', 'run-h'))).toEqual(['start']);
    expect(await store.readHistory('zombie')).toEqual([]);
  });
});

describe('reply-append-many.lua', () => {
  it('appends to many replies in one call, each fenced on its own chat: a fenced-out reply gets nothing, a stopped one says stop, the others ok, in order', async () => {
    const a = await takeFence('many-a', 'w1:run-ma');
    const old = await takeFence('many-b', 'w1:run-mb', true);
    const b = await takeFence('many-b', 'w2:run-mb2');
    const c = await takeFence('many-c', 'w1:run-mc');
    for (const [chatKey, fence, runId] of [
      ['many-a', a, 'run-ma'],
      ['many-b', b, 'run-mb2'],
      ['many-c', c, 'run-mc'],
    ] as const) {
      await replies.write(chatKey, fence, runId, 'open', [chunk({ type: 'start' })]);
    }
    expect(await replies.requestStop('many-c')).toBe('stopping');

    const delta = (d: string) => chunk({ type: 'text-delta', id: 't', delta: d });
    const results = await replies.appendMany([
      { chatKey: 'many-a', fence: a, runId: 'run-ma', fields: [delta('a1'), delta('a2')] },
      { chatKey: 'many-b', fence: old, runId: 'run-mb', fields: [delta('zombie')] },
      { chatKey: 'many-c', fence: c, runId: 'run-mc', fields: [['m', '["m2"]'], delta('c1')] },
    ]);
    expect(results).toEqual(['ok', 'fenced-out', 'stop']);
    const deltas = async (chatKey: string, runId: string) =>
      (await replies.read(chatKey, runId)).map((e) =>
        e.kind === 'chunk' ? (e.chunk.delta ?? e.chunk.type) : e.messageIds.join(),
      );
    expect(await deltas('many-a', 'run-ma')).toEqual(['start', 'a1', 'a2']);
    expect(await redis.exists(replies.key('many-b', 'run-mb'))).toBe(0);
    expect(await deltas('many-b', 'run-mb2')).toEqual(['start']);
    // A stopped turn's chunks are still written: it commits what it did.
    expect(await deltas('many-c', 'run-mc')).toEqual(['start', 'm2', 'c1']);
    const ttl = await redis.pttl(replies.key('many-a', 'run-ma'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });
});
