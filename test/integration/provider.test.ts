import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { messageTokens } from '../../src/shared/tokens.js';
import { RedisProvider } from '../../src/worker/pipeline/provider.js';
import { assistantMessage, textOf, userMessage } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';

const redis = testRedis();
const chatKey = 'telegram-chat-77';
const limits = { maxPending: 100, dedupWindowMs: 60_000 };
let store: ChatStore;

beforeEach(() => {
  store = new ChatStore(redis, { prefix: randomPrefix('provider'), maxEvents: 100 });
});
afterAll(async () => {
  await deleteLabel(redis, 'provider');
  redis.disconnect();
});

function provider(windowMessages = 50, maxPendingPerTurn = 50): RedisProvider {
  return new RedisProvider(store, { windowMessages, maxPendingPerTurn, maxCharsPerMessage: 4000 });
}

async function writeHistory(key: string, messages: ChatMessage[]): Promise<void> {
  await redis.rpush(store.keys(key).hist, ...messages.map((m) => JSON.stringify(m)));
}

async function ingestAll(key: string, messages: ChatMessage[]): Promise<void> {
  for (const m of messages) expect((await store.ingest(key, m, limits)).status).toBe('accepted');
}

/** h0, h1, ...: alternating user and assistant messages, user first. */
function conversation(count: number): ChatMessage[] {
  return Array.from({ length: count }, (_, i) =>
    i % 2 === 0
      ? userMessage(chatKey, `h${i}`, `question ${i}`)
      : assistantMessage(chatKey, `h${i}`, `answer ${i}`),
  );
}

describe('RedisProvider', () => {
  it('returns history oldest first and pending in arrival order', async () => {
    await writeHistory(chatKey, conversation(4));
    await ingestAll(chatKey, [
      userMessage(chatKey, 'p1', 'first pending'),
      userMessage(chatKey, 'p2', 'second pending'),
      userMessage(chatKey, 'p3', 'third pending'),
    ]);
    const result = await provider().load(chatKey);
    expect(result.history.map((m) => m.id)).toEqual(['h0', 'h1', 'h2', 'h3']);
    expect(result.history.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(result.pending.map((e) => textOf(e.message))).toEqual([
      'first pending',
      'second pending',
      'third pending',
    ]);
    const ids = result.pending.map((e) => e.streamId);
    expect(ids.every((id) => /^\d+-\d+$/.test(id))).toBe(true);
    const inbox = await store.readInbox(chatKey, 10);
    expect(ids).toEqual(inbox.map((e) => e.streamId));
  });

  it('returns empty history and pending for an unknown chat', async () => {
    expect(await provider().load('nobody-here')).toEqual({
      history: [],
      pending: [],
      historyTotal: 0,
      archived: 0,
      contexts: 0,
    });
  });

  it('reads only its own chat', async () => {
    await writeHistory(chatKey, [userMessage(chatKey, 'mine', 'mine')]);
    await writeHistory('other-chat', [userMessage('other-chat', 'theirs', 'theirs')]);
    await ingestAll('other-chat', [userMessage('other-chat', 'p-theirs', 'theirs pending')]);
    const result = await provider().load(chatKey);
    expect(result.history.map((m) => m.id)).toEqual(['mine']);
    expect(result.pending).toEqual([]);
    expect(result.historyTotal).toBe(1);
  });

  it('keeps only the newest windowMessages history messages and reports the stored total', async () => {
    await writeHistory(chatKey, conversation(10));
    const result = await provider(3).load(chatKey);
    expect(result.history.map((m) => m.id)).toEqual(['h7', 'h8', 'h9']);
    expect(result.historyTotal).toBe(10);
  });

  it('puts the head summary first when the window does not reach it', async () => {
    const summary = assistantMessage(chatKey, 's0', 'they talked about cats', { kind: 'summary' });
    await writeHistory(chatKey, [summary, ...conversation(10)]);
    const result = await provider(3).load(chatKey);
    expect(result.history.map((m) => m.id)).toEqual(['s0', 'h7', 'h8', 'h9']);
    expect(result.history[0]!.metadata.kind).toBe('summary');
    expect(textOf(result.history[0]!)).toBe('they talked about cats');
    expect(result.historyTotal).toBe(11);
  });

  it('does not repeat the summary when the window already covers it', async () => {
    const summary = assistantMessage(chatKey, 's0', 'they talked about cats', { kind: 'summary' });
    await writeHistory(chatKey, [summary, ...conversation(4)]);
    for (const window of [5, 50]) {
      const result = await provider(window).load(chatKey);
      expect(result.history.map((m) => m.id)).toEqual(['s0', 'h0', 'h1', 'h2', 'h3']);
      expect(result.historyTotal).toBe(5);
    }
  });

  it('does not add the head message when it is not a summary', async () => {
    await writeHistory(chatKey, conversation(6));
    const result = await provider(2).load(chatKey);
    expect(result.history.map((m) => m.id)).toEqual(['h4', 'h5']);
  });

  it('returns at most maxPendingPerTurn pending messages, the oldest ones', async () => {
    await ingestAll(
      chatKey,
      Array.from({ length: 5 }, (_, i) => userMessage(chatKey, `p${i}`, `pending ${i}`)),
    );
    const result = await provider(50, 2).load(chatKey);
    expect(result.pending.map((e) => e.message.id)).toEqual(['p0', 'p1']);
    // Loading does not consume: the rest are still waiting.
    expect(await store.pendingCount(chatKey)).toBe(5);
  });

  it('fills metadata.tokens on every history and pending message that lacks it', async () => {
    const history = [...conversation(3), assistantMessage(chatKey, 'h3', 'a much longer answer '.repeat(20))];
    const pending = [userMessage(chatKey, 'p1', 'hello there'), userMessage(chatKey, 'p2', 'x')];
    await writeHistory(chatKey, history);
    await ingestAll(chatKey, pending);
    const result = await provider().load(chatKey);

    const returned = [...result.history, ...result.pending.map((e) => e.message)];
    expect(returned).toHaveLength(6);
    for (const m of returned) {
      expect(m.metadata.tokens).toBeTypeOf('number');
      expect(m.metadata.tokens).toBeGreaterThan(0);
    }
    const expected = [...history, ...pending].map((m) => messageTokens(m));
    expect(returned.map((m) => m.metadata.tokens)).toEqual(expected);
    // The long message costs more than the short ones: counts are real, not a constant.
    expect(result.history[3]!.metadata.tokens).toBeGreaterThan(result.history[0]!.metadata.tokens! * 5);
  });

  it('uses a cached token count instead of recounting', async () => {
    await writeHistory(chatKey, [
      userMessage(chatKey, 'h0', 'short', { tokens: 999 }),
      assistantMessage(chatKey, 'h1', 'short'),
    ]);
    await ingestAll(chatKey, [userMessage(chatKey, 'p1', 'tiny', { tokens: 555 })]);
    const result = await provider().load(chatKey);
    expect(result.history[0]!.metadata.tokens).toBe(999);
    expect(result.history[1]!.metadata.tokens).toBeLessThan(999);
    expect(result.pending[0]!.message.metadata.tokens).toBe(555);
  });

  it('leaves the stored messages unchanged', async () => {
    await writeHistory(chatKey, conversation(2));
    await provider().load(chatKey);
    const stored = await store.readHistory(chatKey);
    expect(stored.map((m) => m.metadata.tokens)).toEqual([undefined, undefined]);
  });
});
