import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { TurnAbortedError } from '../../src/shared/errors.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { RunningTurns } from '../../src/worker/turn/running-turns.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { textOf } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import {
  echoScript,
  newUserTexts,
  promptTranscript,
  scriptedModel,
  systemText,
  untilAborted,
} from '../helpers/scripted-model.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

const redis = testRedis();
let prefix: string;

beforeEach(() => {
  prefix = randomPrefix('turn');
});
afterAll(async () => {
  await deleteLabel(redis, 'turn');
  redis.disconnect();
});

describe('a turn', () => {
  it('answers pending messages through chat_send and commits user + assistant messages with token counts', async () => {
    const { model, prompts } = scriptedModel();
    const deps = turnDeps(redis, prefix, model);
    await ingestTexts(deps.store, 'c1', 'hello', 'how are you');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', consumed: 2, sent: 1, pending: 0 });

    const history = await deps.store.readHistory('c1');
    expect(history.map((m) => m.role)).toEqual(['user', 'user', 'assistant']);
    expect(history.slice(0, 2).map(textOf)).toEqual(['hello', 'how are you']);
    const toolPart = history[2]!.parts.find((p) => p.type === 'tool-chat_send');
    expect(toolPart).toMatchObject({
      state: 'output-available',
      input: { text: 'echo: hello | how are you' },
    });
    for (const m of history) expect(m.metadata.tokens).toBeGreaterThan(0);
    const outbox = await deps.store.readOutbox('c1', undefined, 10);
    expect(outbox.map((o) => o.text)).toEqual(['echo: hello | how are you']);
    expect(await deps.store.pendingCount('c1')).toBe(0);
    expect(prompts).toHaveLength(2);
    // The system prompt carries the chat's identity for the model and for the mock server.
    expect(prompts[0]![0]).toMatchObject({ role: 'system' });
    expect(systemText(prompts[0]!)).toContain('ChatKey: c1');
  });

  it('sends the final text when the model never calls chat_send', async () => {
    const { model } = scriptedModel(() => ({ text: 'plain answer' }));
    const deps = turnDeps(redis, prefix, model);
    await ingestTexts(deps.store, 'c1', 'hi');
    await runTurn(deps, 'c1');
    expect((await deps.store.readOutbox('c1', undefined, 10)).map((o) => o.text)).toEqual(['plain answer']);
  });

  it('sends identical text once per turn and stops at the per-turn cap', async () => {
    const { model } = scriptedModel((_prompt, call) => {
      if (call >= 3) return { text: '' };
      return {
        toolCalls: [
          { name: 'chat_send', input: { text: 'same' } },
          { name: 'chat_send', input: { text: `n${call}` } },
        ],
      };
    });
    const deps = turnDeps(redis, prefix, model, { maxSendsPerTurn: 3 });
    await ingestTexts(deps.store, 'c1', 'go');
    await runTurn(deps, 'c1');
    expect((await deps.store.readOutbox('c1', undefined, 20)).map((o) => o.text)).toEqual([
      'same',
      'n0',
      'n1',
    ]);
  });

  it('includes the previous history on the next turn, in order', async () => {
    const { model, prompts } = scriptedModel();
    const deps = turnDeps(redis, prefix, model);
    await ingestTexts(deps.store, 'c1', 'first');
    await runTurn(deps, 'c1');
    await ingestTexts(deps.store, 'c1', 'second');
    await runTurn(deps, 'c1');
    const seen = promptTranscript(prompts[2]!);
    expect(seen[0]).toBe('system');
    expect(seen.slice(1)).toEqual([
      'user: first',
      'assistant: tool-call',
      'tool: tool-result',
      'user: second',
    ]);
  });

  it('reads its input with its lease: no separate read of history, inbox, memory or meta', async () => {
    const { model, prompts } = scriptedModel();
    const deps = turnDeps(redis, prefix, model);
    await deps.store.redis.set(deps.store.keys('c1').memory, 'prefers short answers');
    await ingestTexts(deps.store, 'c1', 'hello');
    const separateReads = vi.spyOn(deps.store, 'readTurnInput');
    const metaReads = vi.spyOn(deps.store, 'readMeta');
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', consumed: 1 });
    expect(separateReads).not.toHaveBeenCalled();
    expect(metaReads).not.toHaveBeenCalled();
    expect(JSON.stringify(prompts[0])).toContain('prefers short answers');
    expect(newUserTexts(prompts[0]!)).toEqual(['hello']);
  });

  it('commits and releases its lease in one script: no separate finish, and the chat is free at once', async () => {
    const { model } = scriptedModel();
    const deps = turnDeps(redis, prefix, model);
    await ingestTexts(deps.store, 'c1', 'hello');
    const finishes = vi.spyOn(deps.store, 'finish');
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', pending: 0 });
    expect(finishes).not.toHaveBeenCalled();
    expect((await deps.store.acquire('c1', 'next', 1000)).ok).toBe(true);
  });

  it("writes a chat_send's text part with its outbox item: the reply stream's only write of its own is the open", async () => {
    // A model that takes a moment, as any does: the reply's open is written before it answers.
    const { model } = scriptedModel(async (...args) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return echoScript(...args);
    });
    const deps = { ...turnDeps(redis, prefix, model), replyStreaming: 'always' as const };
    await ingestTexts(deps.store, 'c1', 'hello');
    const replies = deps.replies!;
    const writes = vi.spyOn(replies, 'write');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', sent: 1 });
    expect(writes.mock.calls.map((call) => call[3])).toEqual(['open']);
    const entries = await replies.read('c1', (outcome as { runId: string }).runId);
    const chunks = entries.flatMap((e) => (e.kind === 'chunk' ? [e.chunk] : []));
    expect(chunks.map((c) => c.type)).toEqual([
      'start',
      'start-step',
      'text-start',
      'text-delta',
      'text-end',
      'finish-step',
      'finish',
    ]);
    const [item] = await deps.store.readOutbox('c1', undefined, 10);
    expect(chunks.find((c) => c.type === 'text-delta')).toMatchObject({ id: item!.part, delta: item!.text });
  });

  it('does nothing and calls no model when the inbox is empty', async () => {
    const { model, calls } = scriptedModel();
    const deps = turnDeps(redis, prefix, model);
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'idle' });
    expect(calls()).toBe(0);
    expect((await deps.store.acquire('c1', 'other', 1000)).ok).toBe(true);
  });

  it('answers busy while another live owner holds the chat, without calling the model', async () => {
    const { model, calls } = scriptedModel();
    const deps = turnDeps(redis, prefix, model);
    await ingestTexts(deps.store, 'c1', 'hi');
    await deps.store.acquire('c1', 'someone-else', 5000);
    const outcome = await runTurn(deps, 'c1');
    expect(outcome.status).toBe('busy');
    if (outcome.status === 'busy') expect(outcome.retryInMs).toBeGreaterThan(4000);
    expect(calls()).toBe(0);
  });

  it('takes at most MAX_MESSAGES_PER_TURN pending messages and reports the rest as pending', async () => {
    const { model } = scriptedModel();
    // No merges: between steps a turn takes the oldest pending messages (order demands it),
    // so the batch cap alone is visible only without them.
    const deps = turnDeps(redis, prefix, model, { maxPendingPerTurn: 2, maxMerges: 0 });
    await ingestTexts(deps.store, 'c1', 'a', 'b', 'c', 'd', 'e');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', consumed: 2, pending: 3 });
    expect((await deps.store.readHistory('c1')).filter((m) => m.role === 'user').map(textOf)).toEqual([
      'a',
      'b',
    ]);
  });

  it('fails cleanly on a model error: event recorded, lease released, messages still pending', async () => {
    const { model } = scriptedModel(() => {
      throw new Error('model exploded');
    });
    const deps = turnDeps(redis, prefix, model);
    await ingestTexts(deps.store, 'c1', 'hi');
    await expect(runTurn(deps, 'c1')).rejects.toThrow('model exploded');
    expect(await deps.store.pendingCount('c1')).toBe(1);
    expect(await deps.store.readHistory('c1')).toEqual([]);
    const events = await deps.store.readEvents('c1', undefined, 50);
    expect(events.map((e) => e.type)).toContain('turn.failed');
    expect((await deps.store.acquire('c1', 'next-worker', 1000)).ok).toBe(true);
  });
});

describe('lane merge', () => {
  it('gives a message that arrives mid-turn to the model in the same turn, and stores it before the answer to it', async () => {
    let store!: ChatStore;
    const { model, prompts } = scriptedModel(async (prompt, call) => {
      // While the model works on the first message, the user sends another.
      if (call === 0) await ingestTexts(store, 'c1', 'also this');
      return echoScript(prompt, call, {} as never);
    });
    const deps = turnDeps(redis, prefix, model);
    store = deps.store;
    await ingestTexts(store, 'c1', 'first');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', merged: 1, consumed: 2, pending: 0 });

    // Step 1 saw the merged message as an ordinary user message after the tool result.
    expect(promptTranscript(prompts[1]!).slice(-1)).toEqual(['user: also this']);
    expect(newUserTexts(prompts[1]!)).toEqual(['also this']);

    const history = await store.readHistory('c1');
    expect(
      history.map(
        (m) =>
          `${m.role}:${m.role === 'user' ? textOf(m) : m.parts.filter((p) => p.type === 'tool-chat_send').length}`,
      ),
    ).toEqual(['user:first', 'assistant:1', 'user:also this', 'assistant:1']);
    const sends = history
      .filter((m) => m.role === 'assistant')
      .map(
        (m) => (m.parts.find((p) => p.type === 'tool-chat_send') as { input: { text: string } }).input.text,
      );
    expect(sends).toEqual(['echo: first', 'echo: also this']);
    expect(await store.pendingCount('c1')).toBe(0);
  });

  it('merges a backlog oldest first, so a later arrival never overtakes an earlier one', async () => {
    let store!: ChatStore;
    const { model } = scriptedModel(async (prompt, call) => {
      if (call === 0) await ingestTexts(store, 'c1', 'late');
      return echoScript(prompt, call, {} as never);
    });
    const deps = turnDeps(redis, prefix, model, { maxPendingPerTurn: 1, maxMerges: 2 });
    store = deps.store;
    await ingestTexts(store, 'c1', 'b1', 'b2', 'b3');
    await runTurn(deps, 'c1');
    const users = (await store.readHistory('c1')).filter((m) => m.role === 'user').map(textOf);
    expect(users).toEqual(['b1', 'b2', 'b3']);
    expect((await store.readAllPending('c1')).map(textOf)).toEqual(['late']);
  });

  it('merges only what fits MAX_INPUT_TOKENS: a message too big for the running turn, and every later one, wait for the next turn', async () => {
    let store!: ChatStore;
    const { model, prompts } = scriptedModel(async (prompt, call) => {
      if (call === 0) await ingestTexts(store, 'c1', 'short', 'word '.repeat(700), 'after');
      return echoScript(prompt, call, {} as never);
    });
    // Room for the first request (a ~115-token system prompt) and a short merge, not for a 700-token one.
    const deps = turnDeps(redis, prefix, model, { maxInputTokens: 920, reserveTokens: 300 });
    store = deps.store;
    await ingestTexts(store, 'c1', 'first');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', merged: 1, pending: 2 });
    expect(newUserTexts(prompts[1]!)).toEqual(['short']);
    // Oldest first, no gaps: the short one after the big one waits too.
    expect((await store.readAllPending('c1')).map(textOf)).toEqual(['word '.repeat(700), 'after']);

    // The next turn starts from its own budget and answers both.
    const next = await runTurn(deps, 'c1');
    expect(next).toMatchObject({ status: 'done', pending: 0 });
    const users = (await store.readHistory('c1')).filter((m) => m.role === 'user').map(textOf);
    expect(users).toEqual(['first', 'short', 'word '.repeat(700), 'after']);
  });

  it('merges at most MAX_MERGES_PER_TURN messages; the rest wait for the next turn', async () => {
    let store!: ChatStore;
    const { model } = scriptedModel(async (prompt, call) => {
      if (call === 0) await ingestTexts(store, 'c1', 'm1', 'm2', 'm3');
      return echoScript(prompt, call, {} as never);
    });
    const deps = turnDeps(redis, prefix, model, { maxMerges: 2 });
    store = deps.store;
    await ingestTexts(store, 'c1', 'first');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', merged: 2, pending: 1 });
    expect((await store.readAllPending('c1')).map(textOf)).toEqual(['m3']);
    const users = (await store.readHistory('c1')).filter((m) => m.role === 'user').map(textOf);
    expect(users).toEqual(['first', 'm1', 'm2']);
  });
  it('does not read the inbox before the next step when its chat_send found no newer message there', async () => {
    const { model, calls } = scriptedModel();
    // A minute: the step follows its chat_send however loaded the machine running the test is.
    const deps = turnDeps(redis, prefix, model, { freshInboxMs: 60_000 });
    await ingestTexts(deps.store, 'c1', 'hello');
    const reads = vi.spyOn(deps.store, 'readInbox');
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', merged: 0, pending: 0 });
    expect(calls()).toBe(2);
    expect(reads).not.toHaveBeenCalled();
  });

  it('keeps a message that lands between the chat_send and the next step for the next turn, which answers it', async () => {
    const { model } = scriptedModel();
    const deps = turnDeps(redis, prefix, model, { freshInboxMs: 60_000 });
    await ingestTexts(deps.store, 'c1', 'first');
    const send = deps.store.sendOutbox.bind(deps.store);
    let arrived = false;
    vi.spyOn(deps.store, 'sendOutbox').mockImplementation(async (...args) => {
      const written = await send(...args);
      // After the write looked at the inbox, before the loop's next step.
      if (!arrived) await ingestTexts(deps.store, 'c1', 'second');
      arrived = true;
      return written;
    });
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', merged: 0, consumed: 1, pending: 1 });
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', consumed: 1, pending: 0 });
    const users = (await deps.store.readHistory('c1')).filter((m) => m.role === 'user').map(textOf);
    expect(users).toEqual(['first', 'second']);
  });
});

describe('shutdown', () => {
  it('a turn stopped by shutdown writes nothing, releases its lease and fails its attempt for a retry', async () => {
    const running = new RunningTurns();
    const { model } = scriptedModel(async (prompt, call, options) => {
      running.stopAll('worker shutting down');
      await untilAborted(options);
      return echoScript(prompt, call, options);
    });
    const deps = { ...turnDeps(redis, prefix, model), running };
    await ingestTexts(deps.store, 'c1', 'hi');
    await expect(runTurn(deps, 'c1')).rejects.toBeInstanceOf(TurnAbortedError);
    expect(await deps.store.readHistory('c1')).toEqual([]);
    expect(await deps.store.readOutbox('c1', undefined, 10)).toEqual([]);
    expect(await deps.store.pendingCount('c1')).toBe(1);
    expect((await deps.store.readEvents('c1', undefined, 50)).map((e) => e.type)).toContain('turn.aborted');
    // Released, not left to expire: the next worker gets the chat at once.
    expect((await deps.store.acquire('c1', 'next', 1000)).ok).toBe(true);
  });
});

describe('fencing', () => {
  it('a turn longer than its lease keeps the chat: the lease is renewed while the model works', async () => {
    const { model } = scriptedModel(async (prompt, call) => {
      if (call === 0) await new Promise((r) => setTimeout(r, 700));
      return echoScript(prompt, call, {} as never);
    });
    const deps = turnDeps(redis, prefix, model, { leaseMs: 200 });
    await ingestTexts(deps.store, 'c1', 'slow one');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', sent: 1 });
    const types = (await deps.store.readEvents('c1', undefined, 50)).map((e) => e.type);
    expect(types).not.toContain('fence.rejected');
  });

  it('a turn that ends within a quarter of its lease sends no renewal', async () => {
    // The model takes past a tenth of the 10 s lease (when every lease used to be renewed),
    // well short of a quarter.
    const { model } = scriptedModel(async (prompt, call, options) => {
      if (call === 0) await new Promise((r) => setTimeout(r, 1100));
      return echoScript(prompt, call, options);
    });
    const deps = { ...turnDeps(redis, prefix, model, { leaseMs: 10_000 }), running: new RunningTurns() };
    const renew = vi.spyOn(deps.store, 'renew');
    const renewMany = vi.spyOn(deps.store, 'renewMany');
    await ingestTexts(deps.store, 'c1', 'quick one');
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', sent: 1 });
    expect(renew).not.toHaveBeenCalled();
    expect(renewMany).not.toHaveBeenCalled();
  });

  it("a turn that outlasts its lease renews it while the model works: leaseUntil moves on, the chat stays the turn's", async () => {
    let store!: ChatStore;
    const leaseUntils: number[] = [];
    const { model } = scriptedModel(async (prompt, call) => {
      if (call === 0) {
        leaseUntils.push(Number((await store.readMeta('c1')).leaseUntil));
        // The model answers only after five renewals (past the lease), however long they take.
        await waitFor(async () => renewals.mock.calls.length >= 5, {
          intervalMs: 10,
          what: 'five renewals',
        });
        leaseUntils.push(Number((await store.readMeta('c1')).leaseUntil));
        expect((await store.acquire('c1', 'other-worker', 1000)).ok).toBe(false);
      }
      return echoScript(prompt, call, {} as never);
    });
    const deps = { ...turnDeps(redis, prefix, model, { leaseMs: 1000 }), running: new RunningTurns() };
    store = deps.store;
    // RunningTurns sends the renewals due at a check together (one lease each here).
    const renewals = vi.spyOn(store, 'renewMany');
    await ingestTexts(store, 'c1', 'slow one');
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', sent: 1 });
    const renewed = (await Promise.all(renewals.mock.results.map((r) => r.value))).flat();
    expect(renewed.length).toBeGreaterThanOrEqual(5);
    expect(renewed.every((ok) => ok === true)).toBe(true);
    expect(leaseUntils[1]).toBeGreaterThan(leaseUntils[0]!);
    const types = (await store.readEvents('c1', undefined, 50)).map((e) => e.type);
    expect(types).not.toContain('fence.rejected');
  });

  it("turns in flight together keep their chats past the lease: the process's RunningTurns renews every lease on one timer", async () => {
    const running = new RunningTurns();
    let store!: ChatStore;
    const busy: boolean[] = [];
    const { model } = scriptedModel(async (prompt, call) => {
      if (prompt.at(-1)?.role !== 'tool') {
        await new Promise((r) => setTimeout(r, 500));
        // Well past the 200 ms lease: another worker still finds the chat held.
        const chatKey = /ChatKey: (\S+)/.exec(systemText(prompt))?.[1] ?? 'unknown';
        busy.push(!(await store.acquire(chatKey, 'other-worker', 1000)).ok);
        await new Promise((r) => setTimeout(r, 200));
      }
      return echoScript(prompt, call, {} as never);
    });
    const deps = { ...turnDeps(redis, prefix, model, { leaseMs: 200 }), running };
    store = deps.store;
    const chats = ['c1', 'c2', 'c3'];
    for (const chat of chats) await ingestTexts(deps.store, chat, `slow one in ${chat}`);
    const outcomes = await Promise.all(chats.map((chat) => runTurn(deps, chat)));
    expect(outcomes.map((o) => o.status)).toEqual(['done', 'done', 'done']);
    expect(busy).toEqual([true, true, true]);
    for (const chat of chats) {
      const types = (await deps.store.readEvents(chat, undefined, 50)).map((e) => e.type);
      expect(types).not.toContain('fence.rejected');
      expect(types).not.toContain('lease.takeover');
    }
    expect(running.size).toBe(0);
  });

  it('a turn renewed by RunningTurns whose chat was taken over stops at its next renewal and writes nothing', async () => {
    const running = new RunningTurns();
    let store!: ChatStore;
    let aborted = false;
    const { model } = scriptedModel(async (prompt, call, options) => {
      if (call === 0) {
        // The lease runs out (as behind a network partition) and another worker takes the chat.
        // (A renewal may land between the two calls: then try again.)
        let taken = false;
        for (let i = 0; i < 50 && !taken; i++) {
          await store.redis.hset(store.keys('c1').meta, 'leaseUntil', 0);
          taken = (await store.acquire('c1', 'other-worker', 10_000)).ok;
        }
        expect(taken).toBe(true);
        // The next shared renewal finds the fence gone and aborts the model call.
        await new Promise((_, reject) => {
          const signal = options.abortSignal;
          const stop = () => {
            aborted = true;
            reject(signal?.reason);
          };
          if (signal?.aborted) stop();
          signal?.addEventListener('abort', stop);
        });
      }
      return echoScript(prompt, call, options);
    });
    const deps = { ...turnDeps(redis, prefix, model, { leaseMs: 200 }), running };
    store = deps.store;
    await ingestTexts(store, 'c1', 'hi');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome.status).toBe('lost');
    expect(aborted).toBe(true);
    expect(await store.readOutbox('c1', undefined, 10)).toEqual([]);
    expect(await store.readHistory('c1')).toEqual([]);
    expect(await store.pendingCount('c1')).toBe(1);
    expect((await store.readEvents('c1', undefined, 50)).map((e) => e.type)).toContain('fence.rejected');
  });

  it('a turn stalled past its lease and taken over can neither send nor commit, and an event records it', async () => {
    let store!: ChatStore;
    const { model } = scriptedModel(async (prompt, call) => {
      if (call === 0) {
        // Block the event loop past the lease: no renewal can run (a GC pause or a hung
        // CPU-bound task looks the same), then another worker takes the chat.
        const until = Date.now() + 400;
        while (Date.now() < until) {
          /* stall */
        }
        const other = await store.acquire('c1', 'other-worker', 10_000);
        expect(other.ok).toBe(true);
      }
      return echoScript(prompt, call, {} as never);
    });
    const deps = turnDeps(redis, prefix, model, { leaseMs: 200 });
    store = deps.store;
    await ingestTexts(store, 'c1', 'hi');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome.status).toBe('lost');

    expect(await store.readOutbox('c1', undefined, 10)).toEqual([]);
    expect(await store.readHistory('c1')).toEqual([]);
    expect(await store.pendingCount('c1')).toBe(1);
    const events = await store.readEvents('c1', undefined, 50);
    const types = events.map((e) => e.type);
    expect(types).toContain('lease.takeover');
    expect(types).toContain('fence.rejected');
    // The new owner's lease is intact: the stale turn's release was refused too.
    expect((await store.acquire('c1', 'third', 1000)).ok).toBe(false);
  });
});
