import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { APICallError, simulateReadableStream } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { ModelUnavailableError } from '../../src/shared/errors.js';
import { applyCompaction } from '../../src/shared/store/archive.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { failBatch, markFailed } from '../../src/shared/store/failures.js';
import { readChatUsage } from '../../src/shared/store/usage.js';
import { type CallUsage, utcDay } from '../../src/shared/usage.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { assistantMessage, counted, userMessage } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

const redis = testRedis();
let prefix: string;
const today = () => utcDay(Date.now());

beforeEach(() => {
  prefix = randomPrefix('usage');
});
afterAll(async () => {
  await deleteLabel(redis, 'usage');
  redis.disconnect();
});

/** The SDK's usage of one call, with every detail the providers report. */
const reported = (input: number, cached: number, written: number, output: number, reasoning: number) => ({
  inputTokens: { total: input, noCache: input - cached - written, cacheRead: cached, cacheWrite: written },
  outputTokens: { total: output, text: output - reasoning, reasoning },
});

type Step = { served: string; usage: ReturnType<typeof reported> } & (
  | { send: string }
  | { text: string }
  | { fail: number }
);

/**
 * A model whose every call answers as scripted, naming the model that served it: streamed
 * (a watched turn) or whole (generateText, a turn nobody watches).
 */
function steppedModel(steps: Step[]) {
  let call = 0;
  const next = () => {
    const at = call++;
    const step = steps[at];
    if (!step) throw new Error('no more steps scripted');
    if ('fail' in step) {
      throw new APICallError({
        message: `failed with ${step.fail}`,
        url: 'http://model.invalid',
        requestBodyValues: {},
        statusCode: step.fail,
        isRetryable: false,
      });
    }
    return { at, step };
  };
  return new MockLanguageModelV4({
    modelId: 'configured',
    doGenerate: async () => {
      const { at, step } = next();
      return {
        content:
          'send' in step
            ? [
                {
                  type: 'tool-call' as const,
                  toolCallId: `c${at}`,
                  toolName: 'chat_send',
                  input: JSON.stringify({ text: step.send }),
                },
              ]
            : [{ type: 'text' as const, text: step.text }],
        finishReason: { unified: 'send' in step ? ('tool-calls' as const) : ('stop' as const), raw: 'x' },
        usage: step.usage,
        response: { modelId: step.served },
        warnings: [],
      };
    },
    doStream: async () => {
      const { at, step } = next();
      const parts: LanguageModelV4StreamPart[] = [
        { type: 'stream-start', warnings: [] },
        { type: 'response-metadata', modelId: step.served },
        ...('send' in step
          ? [
              {
                type: 'tool-call' as const,
                toolCallId: `c${at}`,
                toolName: 'chat_send',
                input: JSON.stringify({ text: step.send }),
              },
            ]
          : [
              { type: 'text-start' as const, id: 't' },
              { type: 'text-delta' as const, id: 't', delta: step.text },
              { type: 'text-end' as const, id: 't' },
            ]),
        {
          type: 'finish',
          usage: step.usage,
          finishReason: { unified: 'send' in step ? 'tool-calls' : 'stop', raw: 'x' },
        },
      ];
      return {
        stream: simulateReadableStream({ chunks: parts, initialDelayInMs: null, chunkDelayInMs: null }),
      };
    },
  });
}

function deps(steps: Step[], replyStreaming: TurnDeps['replyStreaming'] = 'auto'): TurnDeps {
  return { ...turnDeps(redis, prefix, steppedModel(steps)), replyStreaming };
}

const call = (model: string, i: number, c: number, w: number, o: number, r: number): CallUsage => ({
  model,
  inputTokens: i,
  cachedInputTokens: c,
  cacheWriteTokens: w,
  outputTokens: o,
  reasoningTokens: r,
});

async function usageHash(store: ChatStore, chatKey: string): Promise<Record<string, string>> {
  return redis.hgetall(store.keys(chatKey).usage);
}

describe.each([
  ['unstreamed (nobody watches)', 'auto'],
  ['streamed', 'always'],
] as const)('the usage of a turn, %s', (_, streaming) => {
  it('records each model call with the model that served it, on turn.committed and in the chat usage, once', async () => {
    const d = deps(
      [
        { served: 'primary-1', usage: reported(1000, 800, 100, 50, 20), send: 'hello back' },
        { served: 'fallback-2', usage: reported(1100, 0, 0, 10, 0), text: '' },
      ],
      streaming,
    );
    await ingestTexts(d.store, 'c1', 'hello');
    expect(await runTurn(d, 'c1')).toMatchObject({ status: 'done' });

    const committed = (await d.store.readEvents('c1', undefined, 50)).filter(
      (e) => e.type === 'turn.committed',
    );
    expect(committed).toHaveLength(1);
    expect(committed[0]!.data.calls).toEqual([
      { m: 'primary-1', i: 1000, c: 800, w: 100, o: 50, r: 20 },
      { m: 'fallback-2', i: 1100, c: 0, w: 0, o: 10, r: 0 },
    ]);
    const day = today();
    expect(await usageHash(d.store, 'c1')).toEqual({
      [`${day}|primary-1|input`]: '1000',
      [`${day}|primary-1|cached_input`]: '800',
      [`${day}|primary-1|cache_write`]: '100',
      [`${day}|primary-1|output`]: '50',
      [`${day}|primary-1|reasoning`]: '20',
      [`${day}|primary-1|calls`]: '1',
      [`${day}|fallback-2|input`]: '1100',
      [`${day}|fallback-2|output`]: '10',
      [`${day}|fallback-2|calls`]: '1',
      [`${day}|total`]: String(1000 + 50 + 1100 + 10),
    });
    // The release after the commit has nothing left to write: no second count.
    expect((await d.store.readEvents('c1', undefined, 50)).map((e) => e.type)).not.toContain('turn.usage');
  });

  it('a turn that fails on the model after a step records the step it paid for when it releases the chat', async () => {
    const d = deps(
      [
        { served: 'm', usage: reported(500, 0, 0, 40, 0), send: 'working on it' },
        { served: 'm', usage: reported(0, 0, 0, 0, 0), fail: 503 },
      ],
      streaming,
    );
    await ingestTexts(d.store, 'c2', 'hello');
    await expect(runTurn(d, 'c2')).rejects.toBeInstanceOf(ModelUnavailableError);
    expect(await d.store.pendingCount('c2')).toBe(1);
    const events = await d.store.readEvents('c2', undefined, 50);
    expect(events.filter((e) => e.type === 'turn.usage').map((e) => e.data.calls)).toEqual([
      [{ m: 'm', i: 500, c: 0, w: 0, o: 40, r: 0 }],
    ]);
    expect(await usageHash(d.store, 'c2')).toMatchObject({
      [`${today()}|m|input`]: '500',
      [`${today()}|total`]: '540',
    });
  });

  it('a turn whose batch fails records its calls on turn.failed', async () => {
    const d = deps(
      [
        { served: 'm', usage: reported(300, 0, 0, 30, 0), send: 'one moment' },
        { served: 'm', usage: reported(0, 0, 0, 0, 0), fail: 400 },
      ],
      streaming,
    );
    await ingestTexts(d.store, 'c3', 'hello');
    expect(await runTurn(d, 'c3')).toMatchObject({ status: 'failed', code: 'CONTENT_REJECTED' });
    const failed = (await d.store.readEvents('c3', undefined, 50)).filter((e) => e.type === 'turn.failed');
    expect(failed.map((e) => e.data.calls)).toEqual([[{ m: 'm', i: 300, c: 0, w: 0, o: 30, r: 0 }]]);
    expect(await usageHash(d.store, 'c3')).toMatchObject({ [`${today()}|m|calls`]: '1' });
  });
});

describe('usage records', () => {
  it('a fenced-out commit, fail or release writes no usage', async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 100 });
    await ingestTexts(store, 'c4', 'hi');
    const [entry] = await store.readInbox('c4', 10);
    const stale = await store.acquire('c4', 'w1', 1);
    if (!stale.ok) throw new Error('busy');
    await new Promise((r) => setTimeout(r, 5));
    const current = await store.acquire('c4', 'w2', 5000);
    if (!current.ok) throw new Error('busy');
    const usage = [call('m', 100, 0, 0, 10, 0)];
    expect(
      await store.commit('c4', stale.fence, {
        runId: 'r1',
        consumed: [entry!.streamId],
        messages: [counted(assistantMessage('c4', 'a1', 'hi'))],
        usage,
      }),
    ).toMatchObject({ ok: false, reason: 'fenced-out' });
    expect(
      await failBatch(store, 'c4', stale.fence, {
        runId: 'r1',
        consumed: [entry!.streamId],
        messages: [markFailed(entry!.message, 'TURN_FAILED', 'x')],
        notice: 'n',
        ts: Date.now(),
        code: 'TURN_FAILED',
        event: {},
        usage,
      }),
    ).toMatchObject({ ok: false, reason: 'fenced-out' });
    expect((await store.finish('c4', stale.fence, 'w1', 'r1', usage)).ok).toBe(false);
    expect(await usageHash(store, 'c4')).toEqual({});
    // The holder's release counts it, once: a resent release finds the lease free and writes nothing.
    expect((await store.finish('c4', current.fence, 'w2', 'r2', usage)).ok).toBe(true);
    expect((await store.finish('c4', current.fence, 'w2', 'r2', usage)).ok).toBe(true);
    expect(await usageHash(store, 'c4')).toMatchObject({
      [`${today()}|m|calls`]: '1',
      [`${today()}|total`]: '110',
    });
  });

  it('a summary is counted whether its compaction is applied or discarded', async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 100 });
    const seed = await store.acquire('c5', 'seed', 5000);
    if (!seed.ok) throw new Error('busy');
    const messages = ['a', 'b', 'c'].map((t) => counted(userMessage('c5', t, t)));
    await store.commit('c5', seed.fence, { runId: 'seed', consumed: [], messages, releaseAs: 'seed' });
    const summary = counted(assistantMessage('c5', 'sum', 'summary', { kind: 'summary' }));
    const apply = (expectedVersion: string) =>
      applyCompaction(store, 'c5', {
        expectedVersion,
        replaced: messages.slice(0, 2),
        summary,
        archive: undefined,
        maxEvents: 100,
        eventData: { model: 'cheap' },
        usage: [call('cheap', 2000, 0, 0, 200, 0)],
      });
    expect(await apply('7')).toMatchObject({ status: 'stale' });
    expect(await apply('0')).toMatchObject({ status: 'ok' });
    const events = await store.readEvents('c5', undefined, 50);
    expect(
      events
        .filter((e) => e.type.startsWith('compaction.'))
        .map((e) => [e.type, e.data.model, (e.data.calls as unknown[]).length]),
    ).toEqual([
      ['compaction.discarded', 'cheap', 1],
      ['compaction.applied', 'cheap', 1],
    ]);
    expect(await usageHash(store, 'c5')).toMatchObject({
      [`${today()}|cheap|calls`]: '2',
      [`${today()}|cheap|input`]: '4000',
    });
  });

  it('keeps USAGE_KEEP_DAYS days: a day’s first write drops the older days', async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 100, retention: { usageKeepDays: 2 } });
    const key = store.keys('c6').usage;
    const yesterday = utcDay(Date.now() - 86_400_000);
    const old = utcDay(Date.now() - 2 * 86_400_000);
    await redis.hset(
      key,
      `${old}|m|input`,
      5,
      `${old}|total`,
      5,
      `${yesterday}|m|input`,
      7,
      `${yesterday}|total`,
      7,
    );
    const lease = await store.acquire('c6', 'w', 5000);
    if (!lease.ok) throw new Error('busy');
    await store.finish('c6', lease.fence, 'w', 'r', [call('m', 1, 0, 0, 1, 0)]);
    const fields = Object.keys(await redis.hgetall(key));
    expect(fields.filter((f) => f.startsWith(old))).toEqual([]);
    expect(fields).toContain(`${yesterday}|m|input`);
    expect(fields).toContain(`${today()}|m|input`);
  });

  it('sums a chat by model and by day, within from and to', async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 100 });
    await redis.hset(store.keys('c7').usage, {
      '2026-01-01|a|input': 100,
      '2026-01-01|a|output': 10,
      '2026-01-01|a|calls': 1,
      '2026-01-01|total': 110,
      '2026-01-02|a|input': 200,
      '2026-01-02|b|input': 50,
      '2026-01-02|b|cached_input': 40,
      '2026-01-02|b|calls': 1,
      '2026-01-02|a|calls': 2,
      '2026-01-02|total': 250,
      '2026-01-02|notice': 1,
    });
    const all = await readChatUsage(store, 'c7', {});
    expect(all.total).toMatchObject({ calls: 4, inputTokens: 350, cachedInputTokens: 40, outputTokens: 10 });
    expect(all.byModel.map((m) => [m.model, m.inputTokens, m.calls])).toEqual([
      ['a', 300, 3],
      ['b', 50, 1],
    ]);
    expect(all.byDay.map((d) => [d.day, d.inputTokens, d.budgetTokens, d.models.length])).toEqual([
      ['2026-01-01', 100, 110, 1],
      ['2026-01-02', 250, 250, 2],
    ]);
    const second = await readChatUsage(store, 'c7', { from: '2026-01-02', to: '2026-01-02' });
    expect(second.total.inputTokens).toBe(250);
    expect(second.byDay.map((d) => d.day)).toEqual(['2026-01-02']);
  });
});
