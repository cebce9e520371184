import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import {
  type ArchiveEntry,
  applyCompaction,
  readArchive,
  readSnapshot,
} from '../../src/shared/store/archive.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { ContactBook } from '../../src/shared/store/contacts.js';
import { listContexts, switchContext } from '../../src/shared/store/contexts.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { assistantMessage, counted, userMessage } from '../helpers/messages.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/** Retention caps (docs/redis.md "Retention"), each enforced by the script that appends, with tiny settings. */

const redis = testRedis();
const limits = { maxPending: 1000, dedupWindowMs: 60_000 };
let prefix: string;

function storeWith(retention: ConstructorParameters<typeof ChatStore>[1]['retention'], maxEvents = 500) {
  return new ChatStore(redis, { prefix, maxEvents, retention });
}

beforeEach(() => {
  prefix = randomPrefix('retention');
});
afterEach(async () => {
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

async function lease(store: ChatStore, chatKey: string): Promise<string> {
  const res = await store.acquire(chatKey, `owner-${chatKey}`, 60_000);
  if (!res.ok) throw new Error('busy');
  return res.fence;
}

/** One user message in and one answer committed, as a turn does. */
async function turn(store: ChatStore, chatKey: string, n: number, text = `message ${n}`): Promise<void> {
  const user = userMessage(chatKey, `${chatKey}-u${n}`, text);
  const res = await store.ingest(chatKey, user, limits);
  if (res.status !== 'accepted') throw new Error(res.status);
  const fence = await lease(store, chatKey);
  const done = await store.commit(chatKey, fence, {
    runId: `run-${n}`,
    consumed: [res.streamId],
    messages: [counted(user), counted(assistantMessage(chatKey, `${chatKey}-a${n}`, `answer ${n}`))],
  });
  if (!done.ok) throw new Error(done.reason);
  await store.finish(chatKey, fence, `owner-${chatKey}`, `run-${n}`);
}

/** Summarise the whole history into one summary, archiving what it replaced (as compaction does). */
async function compactAll(store: ChatStore, chatKey: string, n: number, padding = ''): Promise<void> {
  const { version, history } = await readSnapshot(store, chatKey);
  const summary: ChatMessage = counted({
    ...assistantMessage(chatKey, `${chatKey}-s${n}`, `summary ${n}`),
    metadata: { ts: Date.now(), chatKey, kind: 'summary' },
  });
  const archive: ArchiveEntry = {
    id: `arc-${n}`,
    kind: 'compaction',
    createdAt: Date.now(),
    sourceRange: { fromId: history[0]!.id, toId: history.at(-1)!.id, count: history.length },
    messages: history.map((m) => (padding ? { ...m, parts: [{ type: 'text' as const, text: padding }] } : m)),
  };
  const res = await applyCompaction(store, chatKey, {
    expectedVersion: version,
    replaced: history,
    summary,
    archive,
    maxEvents: store.maxEvents,
    eventData: {},
  });
  expect(res.status).toBe('ok');
}

describe('archive cap', () => {
  it('keeps at most ARCHIVE_MAX_ENTRIES entries, dropping the oldest, and indexes stay stable', async () => {
    const store = storeWith({ archiveMaxEntries: 3 });
    for (let n = 1; n <= 7; n++) {
      await turn(store, 'a', n);
      await compactAll(store, 'a', n);
    }
    const k = store.keys('a');
    expect(await redis.llen(k.archive)).toBe(3);
    const rows = await readArchive(store, 'a', undefined, 100);
    // Seven entries were ever written (indexes 0..6); the newest three remain, by their index.
    expect(rows.map((r) => [r.index, r.entry.id])).toEqual([
      [4, 'arc-5'],
      [5, 'arc-6'],
      [6, 'arc-7'],
    ]);
    expect((await readArchive(store, 'a', 4, 100)).map((r) => r.entry.id)).toEqual(['arc-6', 'arc-7']);
    expect(await redis.hget(k.meta, 'archiveDropped')).toBe('4');
  });

  it('keeps the archive under ARCHIVE_MAX_BYTES, and its byte count matches what is stored', async () => {
    const store = storeWith({ archiveMaxEntries: 1000, archiveMaxBytes: 8 * 1024 });
    for (let n = 1; n <= 10; n++) {
      await turn(store, 'b', n);
      await compactAll(store, 'b', n, 'x'.repeat(500));
    }
    const k = store.keys('b');
    const entries = await redis.lrange(k.archive, 0, -1);
    const bytes = entries.reduce((sum, e) => sum + Buffer.byteLength(e), 0);
    expect(bytes).toBeLessThanOrEqual(8 * 1024);
    expect(entries.length).toBeGreaterThan(1);
    expect(entries.length).toBeLessThan(10);
    expect(Number(await redis.hget(k.meta, 'archiveBytes'))).toBe(bytes);
    expect(JSON.parse(entries.at(-1)!).id).toBe('arc-10');
  });
});

describe('context snapshot cap', () => {
  it('keeps at most CONTEXTS_MAX snapshots: the oldest goes with its message list, a loaded one stays', async () => {
    const store = storeWith({ contextsMax: 3 });
    const ids: string[] = [];
    for (let n = 1; n <= 5; n++) {
      await turn(store, 'c', n, `topic ${n}`);
      const res = await switchContext(store, 'c', await lease(store, 'c'), { op: 'new', runId: `ctx-${n}` });
      if (res.status !== 'ok' || !res.archivedId) throw new Error(res.status);
      ids.push(res.archivedId);
      // Snapshots are ordered by archivedAt (ms): keep them apart.
      await new Promise((r) => setTimeout(r, 3));
    }
    const kept = (await listContexts(store, 'c', 100)).map((m) => m.id);
    expect(kept.sort()).toEqual(ids.slice(2).sort());
    const lists = await redis.keys(`${prefix}:{c:c}:ctx:*`);
    expect(lists.map((key) => key.split(':ctx:')[1]).sort()).toEqual(ids.slice(2).sort());

    // Loading the oldest kept snapshot while at the cap must not drop that one.
    const oldest = (await listContexts(store, 'c', 100)).at(-1)!;
    await turn(store, 'c', 6);
    const res = await switchContext(store, 'c', await lease(store, 'c'), {
      op: 'load',
      load: oldest,
      runId: 'load',
    });
    expect(res.status).toBe('ok');
    const after = (await listContexts(store, 'c', 100)).map((m) => m.id);
    expect(after).toHaveLength(3);
    expect(after).toContain(oldest.id);
  });
});

describe('outbox window', () => {
  it('keeps the newest OUTBOX_KEEP_ITEMS (+ a quarter) of a chat read over the API', async () => {
    const store = storeWith({ outboxKeep: 4 });
    const fence = await lease(store, 'api');
    const ids: string[] = [];
    for (let n = 0; n < 30; n++) {
      const res = await store.sendOutbox('api', fence, { runId: 'r', text: `reply ${n}`, ts: n });
      if (!res.ok) throw new Error(res.reason);
      ids.push(res.id);
      expect(await redis.xlen(store.keys('api').outbox)).toBeLessThanOrEqual(5);
    }
    const items = await store.readOutbox('api', undefined, 100);
    expect(items.map((i) => i.id)).toEqual(ids.slice(-items.length));
    expect(items.length).toBeGreaterThanOrEqual(4);
  });

  it('never trims an item the delivery cursor has not passed, and trims delivered ones once it moves', async () => {
    const store = storeWith({ outboxKeep: 2 });
    const deliveryStore = new DeliveryStore(redis, prefix, 500);
    await store.ingest('routed', userMessage('routed', 'r-1', 'hi'), limits, {
      channel: 'test',
      threadId: 't',
    });
    const fence = await lease(store, 'routed');
    const ids: string[] = [];
    const send = async (n: number) => {
      const res = await store.sendOutbox('routed', fence, { runId: 'r', text: `reply ${n}`, ts: n });
      if (!res.ok) throw new Error(res.reason);
      ids.push(res.id);
    };
    // Delivery is down: nothing may go, however far past the window the outbox grows.
    for (let n = 0; n < 20; n++) await send(n);
    expect((await store.readOutbox('routed', undefined, 100)).map((i) => i.id)).toEqual(ids);

    // Delivery accepts the first 15 items; the next write trims what it passed, no further.
    const claim = await deliveryStore.claim('routed', 'd1', 60_000, 100);
    if (claim.status !== 'ok') throw new Error(claim.status);
    let cursor = claim.cursor;
    for (const item of claim.items.slice(0, 15)) {
      expect(await deliveryStore.advance('routed', 'd1', cursor, item, 60_000)).toEqual({ ok: true });
      cursor = item.id;
    }
    await send(20);
    const left = (await store.readOutbox('routed', undefined, 100)).map((i) => i.id);
    expect(left).toEqual(ids.slice(15));
    const next = await deliveryStore.claim('routed', 'd1', 60_000, 100);
    expect(next.status === 'ok' && next.items.map((i) => i.id)).toEqual(ids.slice(15));
  });

  it('keeps the part counts of split items within the outbox cap: those of items trimmed from the outbox go', async () => {
    const keep = 2;
    const store = storeWith({ outboxKeep: keep });
    const deliveryStore = new DeliveryStore(redis, prefix, 500, false, undefined, keep);
    await store.ingest('split', userMessage('split', 's-1', 'hi'), limits, {
      channel: 'test',
      threadId: 't',
    });
    const fence = await lease(store, 'split');
    const parts = store.keys('split').parts;
    const ids: string[] = [];
    for (let n = 0; n < 20; n++) {
      const res = await store.sendOutbox('split', fence, { runId: 'r', text: `reply ${n}`, ts: n });
      if (!res.ok) throw new Error(res.reason);
      ids.push(res.id);
      const claim = await deliveryStore.claim('split', 'd1', 60_000, 1);
      if (claim.status !== 'ok') throw new Error(claim.status);
      const item = claim.items[0]!;
      const split = { itemId: item.id, channel: 'test', parts: 2 + (n % 3), format: 'f' };
      expect(
        await deliveryStore.advance('split', 'd1', claim.cursor, item, 60_000, undefined, { split }),
      ).toEqual({
        ok: true,
      });
      // Never past the cap and a quarter (at least one more), as the outbox itself.
      expect(await redis.hlen(parts)).toBeLessThanOrEqual(keep + 1);
    }
    const fields = await redis.hkeys(parts);
    expect(fields).toContain(ids[19]);
    for (const old of ids.slice(0, 15)) expect(fields).not.toContain(old);
    // What the outbox still holds keeps its count.
    const items = await store.readOutbox('split', undefined, 100);
    expect(items.length).toBeGreaterThanOrEqual(keep);
    for (const item of items) expect(item.parts).toBe(2 + (ids.indexOf(item.id) % 3));
  });

  it('trims a contact send into a chat the same way (contact-receive.lua)', async () => {
    const store = storeWith({ outboxKeep: 3 });
    const book = new ContactBook(store, { retentionMs: 60_000, dedupWindowMs: 60_000 });
    const fence = await lease(store, 'from');
    for (let n = 0; n < 12; n++) {
      const res = await book.send(
        { chatKey: 'from', fence, runId: `r${n}` },
        { chatKey: 'to', username: 'to', lastSeen: 0 },
        `hi ${n}`,
      );
      expect(res.ok).toBe(true);
    }
    expect(await redis.xlen(store.keys('to').outbox)).toBeLessThanOrEqual(4);
    expect(await redis.pttl(store.keys('to').relayed)).toBeGreaterThan(0);
  });
});

describe('event stream cap', () => {
  it('trims the events of a chat to about EVENTS_MAX_LEN (approximate: whole stream nodes)', async () => {
    const store = storeWith({}, 10);
    for (let n = 0; n < 400; n++)
      await store.appendEvent('ev', 'turn.aborted', { runId: 'r', reason: 'test', n });
    const len = await redis.xlen(store.keys('ev').events);
    // MAXLEN ~ drops whole radix-tree nodes (stream-node-max-entries, 100 by default).
    expect(len).toBeGreaterThanOrEqual(10);
    expect(len).toBeLessThanOrEqual(110);
  });
});

describe('dedupe window (seen ids)', () => {
  it('expires on an idle chat: no next ingest needed', async () => {
    const store = storeWith({});
    const window = { maxPending: 1000, dedupWindowMs: 1000 };
    expect((await store.ingest('idle', userMessage('idle', 'm1', 'hi'), window)).status).toBe('accepted');
    const seen = store.keys('idle').seen;
    const ttl = await redis.pttl(seen);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1000);
    // Within the window the id is still a duplicate.
    expect((await store.ingest('idle', userMessage('idle', 'm1', 'hi'), window)).status).toBe('duplicate');
    await waitFor(async () => (await redis.exists(seen)) === 0, {
      timeoutMs: 5000,
      what: 'the seen set to expire',
    });
    expect(await redis.exists(store.keys('idle').inbox)).toBe(1);
  });
});
