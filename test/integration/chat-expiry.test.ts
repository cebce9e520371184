import type { Queue } from 'bullmq';
import { beforeEach, describe, expect, it } from 'vitest';
import { createIngest } from '../../src/ingress/ingest.js';
import { enqueueTurn, type TurnJob } from '../../src/shared/jobs.js';
import { chatsIndexKey } from '../../src/shared/keys.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { switchContext } from '../../src/shared/store/contexts.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { writeMemory } from '../../src/shared/store/memory.js';
import { expireChat, expireIdleChats } from '../../src/worker/upkeep/retention.js';
import { prepareSweeper } from '../../src/worker/upkeep/sweeper.js';
import { assistantMessage, counted, userMessage } from '../helpers/messages.js';
import { keysUnder, waitFor } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';
import { useTurnsSuite } from '../helpers/turns-suite.js';

/** CHAT_TTL_DAYS: a whole idle chat goes, every key and its index entry; never a busy one. */

const suite = useTurnsSuite('expiry');
const { redis } = suite;
const limits = { maxPending: 1000, dedupWindowMs: 60_000 };
const TTL_MS = 150;
let store: ChatStore;
let turns: Queue<TurnJob>;
let prefix: string;

beforeEach(() => {
  ({ store, turns, prefix } = suite);
});

// Tiny TTLs for speed; a test whose chat must stay younger than the TTL while the machine is
// loaded uses a longer one (chats only ever get older, so the other checks cannot flake).
const deps = (ttlMs = TTL_MS) => ({ store, queues: [turns], ttlMs, batch: 100, logger: silentLogger() });
const idle = (ttlMs = TTL_MS) => new Promise((r) => setTimeout(r, ttlMs + 50));
const chatKeysOf = async (chatKey: string) =>
  (await keysUnder(redis, prefix)).filter((k) => k.includes(`{c:${chatKey}}`));
const indexed = async (chatKey: string) => (await redis.zscore(chatsIndexKey(prefix), chatKey)) !== null;

/** A chat with every kind of key: history, outbox, events, seen, meta, a snapshot, an archive, a memory, usage. */
async function fullChat(chatKey: string): Promise<void> {
  const user = userMessage(chatKey, `${chatKey}-1`, 'hello');
  const res = await store.ingest(chatKey, user, limits, { channel: 'test', threadId: chatKey });
  if (res.status !== 'accepted') throw new Error(res.status);
  await store.touchChat(chatKey);
  const lease = await store.acquire(chatKey, 'w', 60_000);
  if (!lease.ok) throw new Error('busy');
  await store.commit(chatKey, lease.fence, {
    runId: 'r1',
    consumed: [res.streamId],
    messages: [counted(user), counted(assistantMessage(chatKey, `${chatKey}-a1`, 'hi'))],
    usage: [
      {
        model: 'm',
        inputTokens: 10,
        cachedInputTokens: 0,
        cacheWriteTokens: 0,
        outputTokens: 5,
        reasoningTokens: 0,
      },
    ],
  });
  const sent = await store.sendOutbox(chatKey, lease.fence, { runId: 'r1', text: 'hi', ts: 1 });
  if (!sent.ok) throw new Error(sent.reason);
  // Delivered, as two messages: the cursor is at the newest item and its part count recorded.
  const delivery = new DeliveryStore(redis, prefix, 100);
  const claim = await delivery.claim(chatKey, 'd', 60_000, 10);
  if (claim.status !== 'ok') throw new Error(claim.status);
  const split = { itemId: sent.id, channel: 'test', parts: 2, format: 'f' };
  const moved = await delivery.advance(chatKey, 'd', claim.cursor, claim.items.at(-1)!, 60_000, undefined, {
    split,
  });
  if (!moved.ok) throw new Error(moved.reason);
  await delivery.release(chatKey, 'd');
  await switchContext(store, chatKey, lease.fence, { op: 'new', runId: 'r1' });
  await redis.rpush(store.keys(chatKey).archive, '{}');
  const memory = await writeMemory(store, chatKey, {
    content: 'notes',
    fence: lease.fence,
    runId: 'r1',
    maxTokens: 100,
  });
  if (memory.status !== 'ok') throw new Error(memory.status);
  await store.finish(chatKey, lease.fence, 'w', 'r1');
}

describe('chat expiry (CHAT_TTL_DAYS)', () => {
  it('deletes every key of an idle chat and its index entry together, and leaves other chats alone', async () => {
    await fullChat('old');
    const before = await chatKeysOf('old');
    expect(before.some((k) => k.includes(':ctx:'))).toBe(true);
    expect(before).toContain(store.keys('old').memory);
    expect(before).toContain(store.keys('old').usage);
    expect(before).toContain(store.keys('old').parts);
    expect(before.length).toBeGreaterThanOrEqual(8);
    await idle(1000);
    await fullChat('fresh');

    const report = await expireIdleChats(deps(1000));
    expect(report).toMatchObject({ checked: 1, deleted: 1 });
    expect(await chatKeysOf('old')).toEqual([]);
    expect(await indexed('old')).toBe(false);
    expect((await chatKeysOf('fresh')).length).toBe(before.length);
    expect(await indexed('fresh')).toBe(true);
  });

  it('runs as a scheduled maintenance job when CHAT_TTL is on', async () => {
    await fullChat('scheduled');
    const sweeper = await prepareSweeper({
      prefix,
      connection: redis,
      store,
      turns,
      batch: 100,
      intervalMs: 60_000,
      expiry: { ttlMs: TTL_MS, intervalMs: 100, queues: [turns] },
      logger: silentLogger(),
    });
    try {
      await sweeper.run();
      await waitFor(async () => (await chatKeysOf('scheduled')).length === 0, { what: 'the expiry job' });
      expect(await indexed('scheduled')).toBe(false);
    } finally {
      await sweeper.close();
    }
  });

  it('never deletes a chat with a pending message, a running turn or a live job', async () => {
    await store.ingest('pending', userMessage('pending', 'p-1', 'waiting'), limits);
    await store.touchChat('pending', 0);
    await fullChat('leased');
    await store.acquire('leased', 'turn', 60_000);
    await store.touchChat('leased', 0);
    await fullChat('queued');
    await enqueueTurn(turns, 'queued');
    await store.touchChat('queued', 0);
    const keys = { pending: await chatKeysOf('pending'), leased: await chatKeysOf('leased') };
    await idle();

    const report = await expireIdleChats(deps());
    expect(report).toMatchObject({ checked: 3, deleted: 0 });
    expect(report.kept).toEqual({ 'kept:pending': 1, 'kept:leased': 1, job: 1 });
    expect(await chatKeysOf('pending')).toEqual(keys.pending);
    expect(await chatKeysOf('leased')).toEqual(keys.leased);
    expect(await indexed('pending')).toBe(true);
  });

  it('keeps a chat with a reply not yet delivered, and one whose stream saw activity within the TTL', async () => {
    await fullChat('undelivered');
    await redis.hset(store.keys('undelivered').meta, 'deliveredTo', '0-0');
    await fullChat('busy');
    await idle(1000);
    // The index entry is old, but the chat's own stream is not (a contact send, a reply):
    // everything else of it is over 1 s old, the event well within the TTL.
    await store.appendEvent('busy', 'contact.received', { sendId: 's1', from: 'other', itemId: '1-0' });
    expect(await expireChat(deps(), 'undelivered', Date.now())).toBe('kept:undelivered');
    expect(await expireChat(deps(800), 'busy', 0)).toBe('kept:active');
    expect(Number(await redis.zscore(chatsIndexKey(prefix), 'busy'))).toBeGreaterThan(Date.now() - 800);
  });

  it('removes an index entry whose chat has no key left, and not one touched since it was read', async () => {
    await store.touchChat('ghost', 1);
    expect(await expireChat(deps(), 'ghost', 1)).toBe('gone');
    expect(await indexed('ghost')).toBe(false);

    await fullChat('retouched');
    await idle();
    const [, score] = await redis.zrange(chatsIndexKey(prefix), 0, 0, 'WITHSCORES');
    await store.touchChat('retouched', Date.now());
    expect(await expireChat(deps(), 'retouched', Number(score))).toBe('deleted');
    // A newer touch means a message came after the read: the entry stays (its chat is new).
    expect(await indexed('retouched')).toBe(true);
  });

  it('a message arriving during or after expiry is kept and answered', async () => {
    const { model } = scriptedModel();
    await suite.startWorker(model, 8);
    const ingest = createIngest({ store, turns, limits: { maxPendingPerChat: 100, dedupWindowMs: 60_000 } });

    const chats = Array.from({ length: 12 }, (_, i) => `edge-${i}`);
    for (const chatKey of chats) await fullChat(chatKey);
    await idle();
    const expire = (chatKey: string) => expireChat(deps(), chatKey, Date.now() - TTL_MS);
    const late = (chatKey: string) =>
      ingest({ chatKey, message: userMessage(chatKey, `${chatKey}-late`, 'still there?') });
    // After: the chat is gone, the message starts a new one.
    for (const chatKey of chats.slice(0, 4)) {
      expect(await expire(chatKey)).toBe('deleted');
      expect((await late(chatKey)).status).toBe('accepted');
    }
    // Before: the message is pending (or its job live), the chat is kept.
    for (const chatKey of chats.slice(4, 8)) {
      expect((await late(chatKey)).status).toBe('accepted');
      expect(['kept:pending', 'job']).toContain(await expire(chatKey));
    }
    // At the same time: whichever runs first, the message lives.
    const raced = await Promise.all(
      chats.slice(8).map(async (chatKey) => (await Promise.all([expire(chatKey), late(chatKey)]))[0]),
    );
    expect(raced.every((v) => ['deleted', 'kept:pending', 'job'].includes(v))).toBe(true);

    for (const chatKey of chats) {
      const history = await waitFor(
        async () => {
          const h = await store.readHistory(chatKey);
          return h.some((m) => m.id === `${chatKey}-late`) && h.at(-1)?.role === 'assistant' && h;
        },
        { what: `${chatKey} answered` },
      );
      expect(history.filter((m) => m.id === `${chatKey}-late`)).toHaveLength(1);
      expect(await indexed(chatKey)).toBe(true);
    }
  });
});
