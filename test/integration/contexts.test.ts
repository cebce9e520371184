import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import {
  findContext,
  getContextMessages,
  listContexts,
  switchContext,
} from '../../src/shared/store/contexts.js';
import { compactChat } from '../../src/worker/compaction/compact.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { assistantMessage, counted, textOf, userMessage } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { echoScript, promptTranscript, scriptedModel } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';

const redis = testRedis();
let prefix: string;
let store: ChatStore;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeEach(() => {
  prefix = randomPrefix('ctx');
  store = new ChatStore(redis, { prefix, maxEvents: 500 });
});
afterAll(async () => {
  await deleteLabel(redis, 'ctx');
  redis.disconnect();
});

async function commit(chatKey: string, messages: ChatMessage[]): Promise<void> {
  const lease = await store.acquire(chatKey, 'seeder', 5000);
  if (!lease.ok) throw new Error('busy');
  await store.commit(chatKey, lease.fence, {
    runId: 'seed',
    consumed: [],
    messages: messages.map(counted),
  });
  await store.finish(chatKey, lease.fence, 'seeder', 'seed');
}

/** Run one switch the way the operator path does: through the lane. */
async function operatorSwitch(chatKey: string, req: Parameters<typeof switchContext>[3]) {
  const lease = await store.acquire(chatKey, 'op', 5000);
  if (!lease.ok) throw new Error('busy');
  try {
    return await switchContext(store, chatKey, lease.fence, req);
  } finally {
    await store.finish(chatKey, lease.fence, 'op', req.runId);
  }
}

const topic = (chatKey: string, name: string, n: number) =>
  Array.from({ length: n }, (_, i) =>
    i % 2 === 0
      ? userMessage(chatKey, `${name}-${i}`, `${name} question ${i}`)
      : assistantMessage(chatKey, `${name}-${i}`, `${name} answer ${i}`),
  );

describe('context snapshots', () => {
  it('new → list → load restores exactly the archived messages, and the replaced history is archived too', async () => {
    const trip = topic('c1', 'trip', 4);
    await commit('c1', trip);
    const created = await operatorSwitch('c1', { op: 'new', title: 'Trip planning', runId: 'r1' });
    expect(created).toMatchObject({ status: 'ok', archivedCount: 4, loadedCount: 0 });
    expect(await store.readHistory('c1')).toEqual([]);
    expect(Number((await store.readMeta('c1')).tokens)).toBe(0);

    const taxes = topic('c1', 'taxes', 2);
    await commit('c1', taxes);
    const [snapshot] = await listContexts(store, 'c1', 10);
    expect(snapshot).toMatchObject({
      title: 'Trip planning',
      messageCount: 4,
      preview: 'trip question 0',
      checkpoint: 'trip-3',
    });

    const loaded = await operatorSwitch('c1', { op: 'load', load: snapshot!, runId: 'r2' });
    expect(loaded).toMatchObject({ status: 'ok', archivedCount: 2, loadedCount: 4 });
    const history = await store.readHistory('c1');
    expect(history.slice(0, 4)).toEqual(await getContextMessages(store, 'c1', snapshot!.id));
    expect(history.slice(0, 4).map((m) => m.id)).toEqual(trip.map((m) => m.id));
    // A marker after the loaded messages says they are earlier context, for reference.
    expect(history).toHaveLength(5);
    expect(textOf(history[4]!)).toMatch(/earlier context, "Trip planning".*for reference/);

    const contexts = await listContexts(store, 'c1', 10);
    expect(contexts.map((c) => c.messageCount)).toEqual([2, 4]);
    const replaced = await getContextMessages(store, 'c1', contexts[0]!.id);
    expect(replaced.map((m) => m.id)).toEqual(taxes.map((m) => m.id));
    const types = (await store.readEvents('c1', undefined, 50)).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['context.new', 'context.loaded']));
  });

  it('clear archives the working history (never deletes) and empties it', async () => {
    await commit('c1', topic('c1', 'misc', 3));
    expect(await operatorSwitch('c1', { op: 'clear', runId: 'r' })).toMatchObject({
      status: 'ok',
      archivedCount: 3,
    });
    expect(await store.readHistory('c1')).toEqual([]);
    const [snap] = await listContexts(store, 'c1', 5);
    expect((await getContextMessages(store, 'c1', snap!.id)).map((m) => m.id)).toEqual([
      'misc-0',
      'misc-1',
      'misc-2',
    ]);
    expect((await store.readEvents('c1', undefined, 50)).map((e) => e.type)).toContain('context.cleared');
  });

  it('load by query picks the right snapshot among several', async () => {
    for (const name of ['pasta-recipes', 'bicycle-repair', 'tax-return']) {
      await commit('c1', topic('c1', name, 2));
      await operatorSwitch('c1', { op: 'new', runId: name });
    }
    expect((await findContext(store, 'c1', 'how do I fix the bicycle chain'))?.preview).toBe(
      'bicycle-repair question 0',
    );
    expect((await findContext(store, 'c1', 'tax'))?.preview).toBe('tax-return question 0');
    expect(await findContext(store, 'c1', 'astronomy')).toBeUndefined();
  });

  it('a stale (fenced-out) worker cannot switch contexts', async () => {
    await commit('c1', topic('c1', 'keep', 2));
    const stale = await store.acquire('c1', 'w1', 100);
    await sleep(150);
    const fresh = await store.acquire('c1', 'w2', 5000);
    if (!stale.ok || !fresh.ok) throw new Error('acquire failed');
    expect(await switchContext(store, 'c1', stale.fence, { op: 'clear', runId: 'stale' })).toEqual({
      status: 'fenced-out',
    });
    expect((await store.readHistory('c1')).map((m) => m.id)).toEqual(['keep-0', 'keep-1']);
    expect(await listContexts(store, 'c1', 10)).toEqual([]);
    const rejected = (await store.readEvents('c1', undefined, 50)).filter((e) => e.type === 'fence.rejected');
    expect(rejected.map((e) => e.data.op)).toEqual(['context.clear']);
  });

  it('a compaction that races a context switch is discarded by its CAS, never applied to the new history', async () => {
    await commit('c1', topic('c1', 'old', 12));
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const slow = scriptedModel(async () => {
      await gate;
      return { text: 'summary of the old context' };
    });
    const running = compactChat(
      {
        store,
        model: slow.model,
        modelName: 'scripted',
        logger: silentLogger(),
        settings: {
          keepLast: 2,
          keepRecentTokens: 0,
          maxOutputTokens: 100,
          archive: true,
          maxEvents: 500,
          maxCharsPerMessage: 4000,
        },
      },
      'c1',
    );
    await waitFor(async () => slow.calls() === 1, { what: 'compaction waiting on the model' });
    await operatorSwitch('c1', { op: 'new', runId: 'switch' });
    await commit('c1', topic('c1', 'new', 12));
    release();
    expect(await running).toMatchObject({ status: 'stale' });
    const history = await store.readHistory('c1');
    expect(history.map((m) => m.id)).toEqual(topic('c1', 'new', 12).map((m) => m.id));
  });
});

describe('context tools in a turn', () => {
  it('after chat_context_new the turn continues with only the system prompt and the current user message', async () => {
    const { model, prompts } = scriptedModel((prompt, call) => {
      if (call === 0)
        return {
          toolCalls: [{ name: 'chat_context_new', input: { title: 'old stuff', reason: 'unrelated' } }],
        };
      if (call === 1) return { toolCalls: [{ name: 'chat_send', input: { text: 'fresh answer' } }] };
      return echoScript(prompt, call, {} as never);
    });
    const deps = turnDeps(redis, prefix, model);
    await commit('c1', topic('c1', 'old', 6));
    await deps.store.ingest('c1', userMessage('c1', 'now', 'a brand new subject'), {
      maxPending: 10,
      dedupWindowMs: 60_000,
    });
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', sent: 1 });

    const first = promptTranscript(prompts[0]!);
    expect(first.some((l) => l.includes('old question 0'))).toBe(true);
    const next = promptTranscript(prompts[1]!);
    expect(next[0]).toBe('system');
    expect(next[1]).toBe('user: a brand new subject');
    expect(next.join('\n')).not.toContain('old question');
    expect(next.slice(2)).toEqual(['assistant: tool-call', 'tool: tool-result']);

    // The old history is a snapshot; the working history starts at the current message.
    const history = await deps.store.readHistory('c1');
    expect(history[0]!.id).toBe('now');
    const [snap] = await listContexts(deps.store, 'c1', 5);
    expect(snap).toMatchObject({ title: 'old stuff', reason: 'unrelated', messageCount: 6 });
  });

  it('after chat_context_new a message arriving mid-turn gets the room the archived context took', async () => {
    // ~600 tokens of old topic fit the first request; counted on top of it, a ~400-token
    // arrival would not fit what is left (passes from 900 to 1,100 tokens; fails at each without the fix).
    const old = Array.from({ length: 6 }, (_, i) =>
      (i % 2 === 0 ? userMessage : assistantMessage)('c1', `old-${i}`, `old ${i} ${'filler '.repeat(95)}`),
    );
    const big = `late ${'word '.repeat(400)}`;
    let deps!: ReturnType<typeof turnDeps>;
    const { model, prompts } = scriptedModel(async (prompt, call) => {
      if (call === 0) {
        await deps.store.ingest('c1', userMessage('c1', 'late', big), {
          maxPending: 10,
          dedupWindowMs: 60_000,
        });
        return { toolCalls: [{ name: 'chat_context_new', input: { title: 'old stuff' } }] };
      }
      return echoScript(prompt, call, {} as never);
    });
    deps = turnDeps(redis, prefix, model, { maxInputTokens: 1_000, reserveTokens: 50 });
    await commit('c1', old);
    await deps.store.ingest('c1', userMessage('c1', 'now', 'a new subject'), {
      maxPending: 10,
      dedupWindowMs: 60_000,
    });
    const outcome = await runTurn(deps, 'c1');
    expect(promptTranscript(prompts[0]!).join('\n')).toContain('old 0');
    expect(outcome).toMatchObject({ status: 'done', merged: 1, pending: 0 });
    expect(promptTranscript(prompts[1]!).join('\n')).toContain('user: late word');
  });

  it('after chat_context_load the turn continues with the loaded context, marked as earlier material', async () => {
    await commit('c1', topic('c1', 'garden', 4));
    await operatorSwitch('c1', { op: 'new', title: 'Garden plans', runId: 'r' });
    const { model, prompts } = scriptedModel((prompt, call) => {
      if (call === 0) return { toolCalls: [{ name: 'chat_context_load', input: { query: 'garden' } }] };
      return echoScript(prompt, call, {} as never);
    });
    const deps = turnDeps(redis, prefix, model);
    await deps.store.ingest('c1', userMessage('c1', 'back', 'back to the garden'), {
      maxPending: 10,
      dedupWindowMs: 60_000,
    });
    await runTurn(deps, 'c1');
    const next = promptTranscript(prompts[1]!).join('\n');
    expect(next).toContain('garden question 0');
    expect(next).toMatch(/earlier context, "Garden plans"/);
    const history = await deps.store.readHistory('c1');
    expect(history.slice(0, 4).map((m) => m.id)).toEqual(['garden-0', 'garden-1', 'garden-2', 'garden-3']);
    expect(history.find((m) => m.id === 'back')).toBeDefined();
  });
});
