import { type LanguageModel, type ToolSet, tool } from 'ai';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ModelUnavailableError, TurnAbortedError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { runLoop } from '../../src/worker/agent/loop.js';
import { TurnAbort } from '../../src/worker/agent/turn-abort.js';
import { RunningTurns } from '../../src/worker/turn/running-turns.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { echoScript, scriptedModel, untilAborted } from '../helpers/scripted-model.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

const redis = testRedis();
let prefix: string;

beforeEach(() => {
  prefix = randomPrefix('steptimeout');
});
afterAll(async () => {
  await deleteLabel(redis, 'steptimeout');
  redis.disconnect();
});

const STEP_MS = 300;

/** A bare tool loop on `turn` with STEP_MS per step: one user message, no merges. */
function loopOf(turn: TurnAbort, model: LanguageModel, tools: ToolSet, maxSteps: number) {
  return runLoop({
    model,
    system: 's',
    messages: [{ role: 'user', content: 'hi' }],
    tools,
    maxSteps,
    maxMerges: 0,
    abort: turn,
    responseId: 'r',
    logger: silentLogger(),
    nextArrivals: async () => [],
    toModel: async () => [],
    stepTimeoutMs: STEP_MS,
  });
}

describe('LLM_TIMEOUT_MS bounds each model step', () => {
  it('a step past it fails the turn as the model’s timeout: nothing written, messages kept pending, the call not retried, the lease released', async () => {
    let aborted: unknown;
    const { model, calls } = scriptedModel(async (_prompt, _call, options) => {
      try {
        return await untilAborted(options);
      } catch (err) {
        aborted = err;
        throw err;
      }
    });
    const deps = turnDeps(redis, prefix, model, { stepTimeoutMs: STEP_MS });
    await ingestTexts(deps.store, 'c1', 'hi');

    const err = await runTurn(deps, 'c1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelUnavailableError);
    expect((err as ModelUnavailableError).kind).toBe('timeout');
    const cause = (err as ModelUnavailableError).cause as DOMException;
    expect(cause).toBe(aborted);
    expect(cause.name).toBe('TimeoutError');
    expect(cause.message).toBe(`Step timeout of ${STEP_MS}ms exceeded`);
    expect(calls()).toBe(1);

    expect(await deps.store.readHistory('c1')).toEqual([]);
    expect(await deps.store.readOutbox('c1', undefined, 10)).toEqual([]);
    expect(await deps.store.pendingCount('c1')).toBe(1);
    const events = await deps.store.readEvents('c1', undefined, 50);
    expect(events.filter((e) => e.type === 'turn.failed').map((e) => e.data)).toEqual([
      expect.objectContaining({ reason: 'model_unavailable', kind: 'timeout' }),
    ]);
    expect(events.map((e) => e.type)).not.toContain('turn.aborted');
    // Released, not left to expire: the next worker gets the chat at once.
    expect((await deps.store.acquire('c1', 'next-worker', 5000)).ok).toBe(true);
  });

  it('is per step: steps each shorter than it commit, however long the turn', async () => {
    const { model, calls } = scriptedModel(async (prompt, call, options) => {
      await new Promise((r) => setTimeout(r, STEP_MS * 0.6));
      return echoScript(prompt, call, options);
    });
    const deps = turnDeps(redis, prefix, model, { stepTimeoutMs: STEP_MS });
    await ingestTexts(deps.store, 'c1', 'hi');
    // Two steps (the chat_send, then the closing text): longer together than one step may take.
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', consumed: 1, sent: 1 });
    expect(calls()).toBe(2);
  });

  it('a turn stopped by shutdown mid-call is still stopped, not timed out', async () => {
    const running = new RunningTurns();
    const { model } = scriptedModel(async (_prompt, _call, options) => {
      running.stopAll('worker shutting down');
      return untilAborted(options);
    });
    const deps = { ...turnDeps(redis, prefix, model, { stepTimeoutMs: 10_000 }), running };
    await ingestTexts(deps.store, 'c1', 'hi');
    await expect(runTurn(deps, 'c1')).rejects.toBeInstanceOf(TurnAbortedError);
    expect(await deps.store.pendingCount('c1')).toBe(1);
    const types = (await deps.store.readEvents('c1', undefined, 50)).map((e) => e.type);
    expect(types).toContain('turn.aborted');
    expect(types).not.toContain('turn.failed');
  });

  it('a turn whose chat was taken over mid-call is lost, not timed out', async () => {
    const running = new RunningTurns();
    let store!: ChatStore;
    const { model } = scriptedModel(async (_prompt, _call, options) => {
      // The lease runs out and another worker takes the chat (a renewal may land between: retry).
      let taken = false;
      for (let i = 0; i < 50 && !taken; i++) {
        await store.redis.hset(store.keys('c1').meta, 'leaseUntil', 0);
        taken = (await store.acquire('c1', 'other-worker', 10_000)).ok;
      }
      expect(taken).toBe(true);
      // The next shared renewal finds the fence gone and aborts the call.
      return untilAborted(options);
    });
    const deps = { ...turnDeps(redis, prefix, model, { leaseMs: 200, stepTimeoutMs: 10_000 }), running };
    store = deps.store;
    await ingestTexts(store, 'c1', 'hi');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome.status).toBe('lost');
    expect(await store.readHistory('c1')).toEqual([]);
    expect(await store.pendingCount('c1')).toBe(1);
    const types = (await store.readEvents('c1', undefined, 50)).map((e) => e.type);
    expect(types).toContain('fence.rejected');
    expect(types).not.toContain('turn.failed');
  });

  it('covers the step’s tool calls too (as the SDK’s step timeout did): a tool still running when the time is up is aborted, and the loop throws the timeout', async () => {
    let toolSaw: unknown;
    const slow = tool({
      inputSchema: z.object({}),
      execute: (_input, { abortSignal }) =>
        new Promise((_, reject) => {
          abortSignal?.addEventListener('abort', () => {
            toolSaw = abortSignal.reason;
            reject(abortSignal.reason);
          });
        }),
    });
    const { model } = scriptedModel((prompt) =>
      prompt.at(-1)?.role === 'tool' ? { text: 'done' } : { toolCalls: [{ name: 'slow', input: {} }] },
    );
    const turn = new TurnAbort();
    const err = await loopOf(turn, model, { slow }, 4).catch((e: unknown) => e);
    expect((toolSaw as DOMException).name).toBe('TimeoutError');
    expect(err).toBe(toolSaw);
    expect(turn.timedOut).toBe(true);
    expect(turn.ended).toBeUndefined();
  });
});

describe('a loop after a timed-out one on the same turn (the retry after a context overflow)', () => {
  it('runs with a signal that is not aborted, so its model call is made and the loop answers', async () => {
    // Call 0 runs past the step time; call 1 is the retry's, which a provider would refuse
    // at once (as fetch does) if it were handed the first loop's aborted signal.
    const { model, calls } = scriptedModel((_prompt, call, options) =>
      call === 0 || options.abortSignal?.aborted ? untilAborted(options) : { text: 'done' },
    );
    const turn = new TurnAbort();
    const loop = () => loopOf(turn, model, {}, 2);
    const first = await loop().catch((e: unknown) => e);
    expect((first as DOMException).name).toBe('TimeoutError');
    expect(turn.timedOut).toBe(true);

    const retry = await loop();
    expect(retry.finalText).toBe('done');
    expect(calls()).toBe(2);
    expect(turn.signal.aborted).toBe(false);
  });
});
