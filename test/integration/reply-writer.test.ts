import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/shared/logger.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { SEND_PART_METADATA } from '../../src/shared/store/reply-send-part.js';
import {
  type ReplyAppend,
  type ReplyEntry,
  type ReplyField,
  ReplyStreams,
} from '../../src/shared/store/reply-streams.js';
import { FlushTick } from '../../src/worker/turn/stream/flush-tick.js';
import { ReplyWriter } from '../../src/worker/turn/stream/reply-writer.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/** The worker's reply stream writer against a real Redis: what it writes, in how many script calls. */

const redis = testRedis();
const prefix = randomPrefix('writer');
const store = new ChatStore(redis, { prefix, maxEvents: 100 });

const typesOf = (fields: readonly ReplyField[]) =>
  fields.map(([f, v]) => (f === 'c' ? (JSON.parse(v) as { type: string }).type : 'answers'));

/** ReplyStreams that keeps the chunk types of every write the writer makes (an append of a batched call counts as one). */
class CountedStreams extends ReplyStreams {
  readonly calls: string[][] = [];
  /** How many replies each appendMany call carried. */
  readonly batches: number[] = [];
  override write(...args: Parameters<ReplyStreams['write']>): ReturnType<ReplyStreams['write']> {
    this.calls.push(typesOf(args[4]));
    return super.write(...args);
  }
  override appendMany(appends: readonly ReplyAppend[]): ReturnType<ReplyStreams['appendMany']> {
    for (const a of appends) this.calls.push(typesOf(a.fields));
    this.batches.push(appends.length);
    return super.appendMany(appends);
  }
}

beforeAll(() => waitReady(redis));
afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

/** A reply opened, then one step that showed one text part. */
const OPENED_STEP = ['answers', 'start', 'start-step', 'text-start', 'text-delta', 'text-end'];

const types = (entries: ReplyEntry[]) => entries.map((e) => (e.kind === 'chunk' ? e.chunk.type : 'answers'));

async function writerFor(chatKey: string, runId: string) {
  const lease = await store.acquire(chatKey, `w:${runId}`, 60_000);
  if (!lease.ok) throw new Error('busy');
  const replies = new CountedStreams(redis, { prefix, maxEvents: 100, maxLen: 100, ttlMs: 60_000 });
  // Delivery follows a write that carried a send's start: counted.
  const platform = { calls: 0 };
  const hooks = { stop: () => undefined, fencedOut: () => undefined, platform: () => void platform.calls++ };
  const writer = new ReplyWriter(replies, chatKey, lease.fence, runId, silentLogger(), hooks, undefined);
  return { writer, replies, fence: lease.fence, platform };
}

describe('ReplyWriter', () => {
  it('joins a part’s text deltas into one entry, and a step’s finish-step waits for the next write (here the close)', async () => {
    const { writer, replies } = await writerFor('steps', 'run-1');
    writer.open(['m1']);
    for (const chunk of [
      { type: 'start-step' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'hel' },
      { type: 'text-delta', id: 't', delta: 'lo' },
      { type: 'text-end', id: 't' },
    ]) {
      writer.chunk(chunk);
    }
    await waitFor(async () => types(await replies.read('steps', 'run-1')).includes('text-end'), {
      what: 'the step written',
    });
    const entries = await replies.read('steps', 'run-1');
    expect(types(entries)).toEqual(OPENED_STEP);
    expect(entries.find((e) => e.kind === 'chunk' && e.chunk.type === 'text-delta')).toMatchObject({
      chunk: { delta: 'hello' },
    });
    // The step ends (the tool ran): nothing new to show, so no write of its own, however long
    // the next step takes.
    writer.chunk({ type: 'finish-step' });
    await new Promise((resolve) => setTimeout(resolve, 100));

    expect(replies.calls).toEqual([
      ['answers', 'start'],
      ['start-step', 'text-start', 'text-delta', 'text-end'],
    ]);
    // The turn ends: the step's end goes out with the reply's last chunk, in one write.
    await writer.close([{ type: 'finish' }]);
    expect(replies.calls.at(-1)).toEqual(['finish-step', 'finish']);
    expect(replies.calls).toHaveLength(3);
  });

  it("hands what waits unwritten to a chat_send's outbox write, which writes it with the item: no write of its own", async () => {
    const { writer, replies, fence, platform } = await writerFor('handoff', 'run-3');
    writer.open(['m1']);
    // The open's write is in flight: its entries go first, so nothing is handed off yet.
    expect(writer.handOff()).toBeUndefined();
    await waitFor(async () => types(await replies.read('handoff', 'run-3')).includes('start'), {
      what: 'the open written',
    });
    for (const chunk of [
      { type: 'start-step' },
      { type: 'text-start', id: 'call-1', providerMetadata: SEND_PART_METADATA },
      { type: 'text-delta', id: 'call-1', delta: 'hi there' },
      { type: 'text-end', id: 'call-1' },
    ]) {
      writer.chunk(chunk);
    }
    const handed = writer.handOff();
    expect(handed?.fields.map(([, v]) => (JSON.parse(v) as { type: string }).type)).toEqual([
      'start-step',
      'text-start',
      'text-delta',
      'text-end',
    ]);
    expect(writer.handOff()).toBeUndefined();
    const res = await store.sendOutbox('handoff', fence, {
      runId: 'run-3',
      text: 'hi there',
      ts: 1,
      part: 'call-1',
      reply: handed,
    });
    expect(res).toMatchObject({ ok: true, stop: false });
    writer.handedOff('ok');
    // The hand-off carried the send's start: delivery is told, as after a write of its own.
    expect(platform.calls).toBe(1);
    // The writer left the flush tick with the hand-off: no write follows.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(replies.calls).toEqual([['answers', 'start']]);
    expect(types(await replies.read('handoff', 'run-3'))).toEqual(OPENED_STEP);
    await writer.close([{ type: 'finish' }]);
    expect(types(await replies.read('handoff', 'run-3')).at(-1)).toBe('finish');
  });

  it('a stop asked of the turn comes back with the outbox write that took the hand-off', async () => {
    const lease = await store.acquire('handoff-stop', 'w:run-4', 60_000);
    if (!lease.ok) throw new Error('busy');
    const replies = new CountedStreams(redis, { prefix, maxEvents: 100, maxLen: 100, ttlMs: 60_000 });
    const stops: string[] = [];
    const hooks = { stop: () => stops.push('stop'), fencedOut: () => undefined };
    const writer = new ReplyWriter(
      replies,
      'handoff-stop',
      lease.fence,
      'run-4',
      silentLogger(),
      hooks,
      undefined,
    );
    writer.open(['m1']);
    await waitFor(async () => types(await replies.read('handoff-stop', 'run-4')).includes('start'), {
      what: 'the open written',
    });
    expect(await replies.requestStop('handoff-stop')).toBe('stopping');
    writer.chunk({ type: 'text-start', id: 't' });
    const handed = writer.handOff()!;
    const res = await store.sendOutbox('handoff-stop', lease.fence, {
      runId: 'run-4',
      text: 'x',
      ts: 1,
      reply: handed,
    });
    expect(res).toMatchObject({ ok: true, stop: true });
    writer.handedOff('stop');
    expect(stops).toEqual(['stop']);
  });

  it("writes a part's first text at the first tick; its further text waits for the steady tick, while a part's end or a new part goes at once", async () => {
    const lease = await store.acquire('steady', 'w:run-s', 60_000);
    if (!lease.ok) throw new Error('busy');
    const replies = new CountedStreams(redis, { prefix, maxEvents: 100, maxLen: 100, ttlMs: 60_000 });
    // A steady tick longer than waitFor's patience: a part's first text written on it would time out.
    const ticks = { first: new FlushTick(15), steady: new FlushTick(60_000) };
    const hooks = { stop: () => undefined, fencedOut: () => undefined };
    const writer = new ReplyWriter(
      replies,
      'steady',
      lease.fence,
      'run-s',
      silentLogger(),
      hooks,
      undefined,
      ticks,
    );
    const written =
      (type: string, n = 1) =>
      async () =>
        types(await replies.read('steady', 'run-s')).filter((t) => t === type).length >= n;
    writer.open(['m1']);
    await waitFor(written('start'), { what: 'the open written' });

    writer.chunk({ type: 'text-start', id: 't1' });
    writer.chunk({ type: 'text-delta', id: 't1', delta: 'a' });
    await waitFor(written('text-delta'), { what: "the part's first text written" });
    for (const delta of ['b', 'c', 'd']) writer.chunk({ type: 'text-delta', id: 't1', delta });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(replies.calls).toEqual([
      ['answers', 'start'],
      ['text-start', 'text-delta'],
    ]);

    // The part's end goes at the first tick, and what waited goes with it as one entry.
    writer.chunk({ type: 'text-end', id: 't1' });
    await waitFor(written('text-end'), { what: "the part's end written" });
    expect(replies.calls.at(-1)).toEqual(['text-delta', 'text-end']);
    const entries = await replies.read('steady', 'run-s');
    expect(entries.filter((e) => e.kind === 'chunk' && e.chunk.type === 'text-delta')).toMatchObject([
      { chunk: { delta: 'a' } },
      { chunk: { delta: 'bcd' } },
    ]);

    // A new part's first text is again for the first tick.
    writer.chunk({ type: 'text-start', id: 't2' });
    writer.chunk({ type: 'text-delta', id: 't2', delta: 'e' });
    await waitFor(written('text-delta', 3), { what: "the second part's first text written" });
    await writer.close([{ type: 'finish' }]);
    expect(replies.calls).toHaveLength(5);
  });

  it('a finish-step alone is written when the turn ends another way (close)', async () => {
    const { writer, replies } = await writerFor('close', 'run-2');
    writer.open(['m1']);
    writer.chunk({ type: 'finish-step' });
    await writer.close([{ type: 'abort' }]);
    expect(types(await replies.read('close', 'run-2'))).toEqual(['answers', 'start', 'finish-step', 'abort']);
  });
  it('writers whose chunks wait for the same flush tick append in one script call, each fenced on its own chat: a stop reaches only its turn', async () => {
    const replies = new CountedStreams(redis, { prefix, maxEvents: 100, maxLen: 100, ttlMs: 60_000 });
    const chats = ['tick-a', 'tick-b', 'tick-c'];
    const stops: string[] = [];
    const writers = await Promise.all(
      chats.map(async (chatKey) => {
        const lease = await store.acquire(chatKey, `w:run-${chatKey}`, 60_000);
        if (!lease.ok) throw new Error('busy');
        const hooks = { stop: () => stops.push(chatKey), fencedOut: () => undefined };
        const writer = new ReplyWriter(
          replies,
          chatKey,
          lease.fence,
          `run-${chatKey}`,
          silentLogger(),
          hooks,
          undefined,
        );
        writer.open(['m1']);
        return writer;
      }),
    );
    for (const chatKey of chats) {
      await waitFor(async () => types(await replies.read(chatKey, `run-${chatKey}`)).includes('start'), {
        what: `${chatKey} opened`,
      });
    }
    expect(await replies.requestStop('tick-b')).toBe('stopping');
    for (const [i, writer] of writers.entries()) {
      writer.chunk({ type: 'text-start', id: 't' });
      writer.chunk({ type: 'text-delta', id: 't', delta: `hi ${chats[i]}` });
    }
    await waitFor(async () => replies.batches.length > 0 && stops.length > 0, { what: 'the tick written' });
    expect(replies.batches).toEqual([3]);
    expect(stops).toEqual(['tick-b']);
    for (const chatKey of chats) {
      const entries = await replies.read(chatKey, `run-${chatKey}`);
      expect(types(entries)).toEqual(['answers', 'start', 'text-start', 'text-delta']);
      expect(entries.at(-1)).toMatchObject({ chunk: { delta: `hi ${chatKey}` } });
    }
    for (const writer of writers) await writer.close([{ type: 'finish' }]);
  });
});
