import { afterAll, describe, expect, it } from 'vitest';
import { type ChatlaneEvent, type EVENT_TYPES, EventFeed, parseEvent } from '../../src/shared/events.js';
import { chatKeyOfEventsKey } from '../../src/shared/keys.js';
import { silentLogger } from '../../src/shared/logger.js';
import { checkBudget } from '../../src/shared/store/budget.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { ContactBook } from '../../src/shared/store/contacts.js';
import { switchContext } from '../../src/shared/store/contexts.js';
import { DeliveryStore } from '../../src/shared/store/delivery.js';
import { failBatch, markFailed } from '../../src/shared/store/failures.js';
import { writeMemory } from '../../src/shared/store/memory.js';
import { ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { compactChat } from '../../src/worker/compaction/compact.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { userMessage } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

const LABEL = 'events';
const redis = testRedis();
afterAll(async () => {
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

/** A store whose every event goes to `handled` through an EventFeed, as startChatlane's onEvent. */
function feedOf(prefix: string, handler: (e: ChatlaneEvent) => void | Promise<void>) {
  return new EventFeed(handler, silentLogger(), (key) => chatKeyOfEventsKey(prefix, key));
}

/** A turn's deps (store and reply streams) whose events go to `feed`. */
function depsWithFeed(prefix: string, feed: EventFeed) {
  const replies = new ReplyStreams(redis, {
    prefix,
    maxEvents: 500,
    maxLen: 1000,
    ttlMs: 60_000,
    events: feed.sink,
  });
  return { ...turnDeps(redis, prefix, scriptedModel().model, {}, { events: feed.sink }), replies };
}

/** Every event of the chat's stream, parsed by its schema (a failure names the event). */
async function streamEvents(store: ChatStore, chatKey: string): Promise<ChatlaneEvent[]> {
  const raw = await redis.xrange(store.keys(chatKey).events, '-', '+');
  return raw.map(([id, fields]) => {
    const type = fields[fields.indexOf('type') + 1]!;
    const json = fields[fields.indexOf('data') + 1]!;
    const parsed = parseEvent(chatKey, id, type, json);
    if (!parsed.ok) throw new Error(`${chatKey} ${type} ${json}: ${parsed.reason}`);
    return parsed.event;
  });
}

describe('typed events', () => {
  it('every event the Lua scripts and the turn write parses by its type, and reaches onEvent once, in order', async () => {
    const prefix = randomPrefix(LABEL);
    const handled: ChatlaneEvent[] = [];
    const feed = feedOf(prefix, (e) => {
      handled.push(e);
    });
    const deps = depsWithFeed(prefix, feed);
    const { store } = deps;

    // A turn: reply.started, turn.committed (with its calls).
    await ingestTexts(store, 'a', 'hello', 'there');
    expect((await runTurn(deps, 'a')).status).toBe('done');

    // Another holder's lease runs out: the next acquire takes over; the stale holder is refused.
    const stale = await store.acquire('b', 'stale-owner', 30);
    if (!stale.ok) throw new Error('no lease');
    await new Promise((r) => setTimeout(r, 60));
    const live = await store.acquire('b', 'live-owner', 5000);
    if (!live.ok) throw new Error('no takeover');
    expect((await store.finish('b', stale.fence, 'stale-owner', 'run-stale')).ok).toBe(false);
    // A stop asked of the live turn, then its model calls recorded at release.
    const replies = deps.replies;
    expect(await replies.requestStop('b')).toBe('stopping');
    const call = {
      model: 'mock',
      inputTokens: 3,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 2,
      reasoningTokens: 0,
    };
    expect((await store.finish('b', live.fence, 'live-owner', 'run-live', [call])).ok).toBe(true);

    // A merge into a streaming reply.
    const c = await store.acquire('c', 'owner-c', 5000);
    if (!c.ok) throw new Error('no lease');
    await replies.write('c', c.fence, 'run-c', 'open', [['m', JSON.stringify(['m1'])]], {
      type: 'reply.started',
      data: { runId: 'run-c', messageIds: ['m1'] },
    });
    await replies.write('c', c.fence, 'run-c', 'append', [['m', JSON.stringify(['m2'])]], {
      type: 'reply.merged',
      data: { runId: 'run-c', messageIds: ['m2'] },
    });
    // The chat's memory, a context switch.
    expect(
      (
        await writeMemory(store, 'c', {
          content: 'likes tea',
          fence: c.fence,
          runId: 'run-c',
          maxTokens: 100,
        })
      ).status,
    ).toBe('ok');
    expect(
      (await switchContext(store, 'c', c.fence, { op: 'new', title: 'fresh', runId: 'run-c' })).status,
    ).toBe('ok');

    // A batch that cannot be processed, and a chat over its budget.
    await ingestTexts(store, 'd', 'bad');
    const d = await store.acquire('d', 'owner-d', 5000);
    if (!d.ok) throw new Error('no lease');
    const [entry] = await store.readInbox('d', 10);
    const failed = await failBatch(store, 'd', d.fence, {
      runId: 'run-d',
      consumed: [entry!.streamId],
      messages: [markFailed(entry!.message, 'INVALID_MESSAGE', 'no')],
      notice: 'sorry',
      ts: Date.now(),
      code: 'INVALID_MESSAGE',
      event: { worker: 'w', error: 'no', messages: [entry!.message.id] },
    });
    expect(failed.ok).toBe(true);
    await ingestTexts(store, 'd', 'more');
    const [more] = await store.readInbox('d', 10);
    const held = await checkBudget(store, 'd', d.fence, {
      runId: 'run-d2',
      consumed: [more!.streamId],
      messages: [more!.message],
      notice: 'budget gone',
      dailyTokens: 0,
    });
    expect(held.ok && held.status).toBe('held');

    // A contact send from one chat to another.
    const contacts = new ContactBook(store, { retentionMs: 60_000, dedupWindowMs: 60_000 });
    const sent = await contacts.send(
      { chatKey: 'c', fence: c.fence, runId: 'run-c' },
      { username: 'erin', chatKey: 'e', lastSeen: Date.now() },
      'hi from c',
    );
    expect(sent.ok).toBe(true);

    // A delivery given up.
    const delivery = new DeliveryStore(redis, prefix, 500, false, feed.sink);
    // Only a chat with a reply route is delivered.
    await redis.hset(store.keys('e').meta, 'route', 'generic:test');
    const claim = await delivery.claim('e', 'deliverer', 5000, 10);
    expect(claim.status).toBe('ok');
    if (claim.status !== 'ok') throw new Error('no claim');
    const item = claim.items[0]!;
    const advanced = await delivery.advance('e', 'deliverer', claim.cursor, item, 5000, {
      itemId: item.id,
      channel: 'generic',
      attempts: 5,
      reason: 'attempts-exhausted',
      error: 'HTTP 503',
    });
    expect(advanced.ok).toBe(true);

    // A compaction of a long history, then the same summary applied again (discarded).
    await ingestTexts(store, 'f', ...Array.from({ length: 10 }, (_, i) => `message ${i}`));
    expect((await runTurn(deps, 'f')).status).toBe('done');
    const compaction = {
      store,
      model: scriptedModel(() => ({ text: 'A summary.' })).model,
      modelName: 'mock',
      logger: silentLogger(),
      settings: {
        keepLast: 2,
        keepRecentTokens: 0,
        maxOutputTokens: 300,
        archive: true,
        maxEvents: 500,
        maxCharsPerMessage: 4000,
      },
    };
    expect((await compactChat(compaction, 'f')).status).toBe('applied');

    const chats = ['a', 'b', 'c', 'd', 'e', 'f'];
    const inStreams = (await Promise.all(chats.map((k) => streamEvents(store, k)))).flat();
    await waitFor(async () => handled.length >= inStreams.length, { what: 'every event handed to onEvent' });
    // Once each, in each chat's order, the same as the stream shows.
    const byChat = (events: ChatlaneEvent[], chatKey: string) =>
      events.filter((e) => e.chatKey === chatKey).map((e) => `${e.id} ${e.type}`);
    for (const k of chats) expect(byChat(handled, k)).toEqual(byChat(inStreams, k));
    expect(handled).toHaveLength(inStreams.length);

    const seen = new Set(inStreams.map((e) => e.type));
    const written = [
      'turn.committed',
      'reply.started',
      'reply.merged',
      'lease.takeover',
      'fence.rejected',
      'turn.stop-requested',
      'turn.usage',
      'memory.updated',
      'context.new',
      'turn.failed',
      'budget.exceeded',
      'contact.sent',
      'contact.received',
      'delivery.failed',
      'compaction.started',
      'compaction.applied',
    ];
    expect(written.filter((t) => !seen.has(t as (typeof EVENT_TYPES)[number]))).toEqual([]);
  });

  it('a handler that throws or rejects is logged and never fails the write or the turn', async () => {
    const prefix = randomPrefix(LABEL);
    const errors: unknown[] = [];
    const logger = silentLogger();
    logger.error = ((obj: unknown) => {
      errors.push(obj);
    }) as typeof logger.error;
    let calls = 0;
    const feed = new EventFeed(
      () => {
        calls += 1;
        if (calls === 1) throw new Error('sync boom');
        return Promise.reject(new Error('async boom'));
      },
      logger,
      (key) => chatKeyOfEventsKey(prefix, key),
    );
    const deps = depsWithFeed(prefix, feed);
    // Two turns: each writes at least its turn.committed, the first handed over throws, the rest reject.
    await ingestTexts(deps.store, 'g', 'hello');
    expect((await runTurn(deps, 'g')).status).toBe('done');
    await ingestTexts(deps.store, 'g', 'again');
    expect((await runTurn(deps, 'g')).status).toBe('done');
    await waitFor(async () => errors.length >= 2, { what: 'both handler failures logged' });
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(await deps.store.readHistory('g')).toHaveLength(4);
  });

  it('without a handler the scripts answer as before and nothing is collected', async () => {
    const prefix = randomPrefix(LABEL);
    const deps = turnDeps(redis, prefix, scriptedModel().model);
    await deps.store.ingest('h', userMessage('h', 'h1', 'hi'), { maxPending: 10, dedupWindowMs: 60_000 });
    expect((await runTurn(deps, 'h')).status).toBe('done');
    const events = await streamEvents(deps.store, 'h');
    expect(events.map((e) => e.type)).toContain('turn.committed');
  });
});

describe('the event catalogue', () => {
  it('parses what the HTTP API shows and names the chat', () => {
    const parsed = parseEvent(
      'alice',
      '1700000000000-0',
      'memory.updated',
      '{"runId":"r","tokens":3,"by":"turn"}',
    );
    expect(parsed).toEqual({
      ok: true,
      event: {
        id: '1700000000000-0',
        chatKey: 'alice',
        type: 'memory.updated',
        ts: 1700000000000,
        data: { runId: 'r', tokens: 3, by: 'turn' },
      },
    });
    expect(parseEvent('alice', '1-0', 'no.such', '{}')).toMatchObject({ ok: false });
    expect(parseEvent('alice', '1-0', 'memory.updated', '{"runId":1}')).toMatchObject({ ok: false });
  });

  it("reads cjson's {} as an empty list", () => {
    const parsed = parseEvent('a', '1-0', 'reply.started', '{"runId":"r","messageIds":{}}');
    expect(parsed.ok && parsed.event.type === 'reply.started' && parsed.event.data.messageIds).toEqual([]);
  });
});
