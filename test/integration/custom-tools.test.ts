import { customProvider, type ToolSet, tool } from 'ai';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { prepareWorker } from '../../src/roles/worker.js';
import { ConfigError } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { createMetrics } from '../../src/shared/metrics.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import {
  type ChatlaneToolContext,
  chatlaneToolContextSchema,
} from '../../src/worker/agent/tools/custom-tools.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../../src/worker/turn/turn-deps.js';
import { userMessage } from '../helpers/messages.js';
import { sampleValue } from '../helpers/prom.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { type Script, scriptedModel } from '../helpers/scripted-model.js';
import { workerConfig } from '../helpers/worker-config.js';

/**
 * Tools given in code (startChatlane's `tools`) on real turns: real Redis, the worker's own
 * wiring (`turnDepsFromConfig` with the tools as a TurnPart), an `ai/test` model behind the
 * configured provider. What the tool gets in `options.context`, the limits MCP tools have
 * (time, result size, errors as tool errors, logged and counted), where its calls show, and
 * `context.once` across turns and against a stale fence.
 */

const LABEL = 'ctools';
const redis = testRedis();
const limits = { maxPending: 100, dedupWindowMs: 60_000 };

afterAll(async () => {
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

interface Lane {
  deps: TurnDeps;
  store: ChatStore;
  prompts: ReturnType<typeof scriptedModel>['prompts'];
  metrics: ReturnType<typeof createMetrics>;
  logs: Array<Record<string, unknown>>;
}

/** A worker's turn deps with `tools` given in code, answering through `script`. */
function lane(tools: ToolSet, script: Script, env: Record<string, string> = {}): Lane {
  const prefix = randomPrefix(LABEL);
  const { model, prompts } = scriptedModel(script);
  const config = workerConfig(prefix, 'http://model.invalid/v1', {
    TOOL_TIMEOUT_MS: '300',
    TOOL_RESULT_MAX_CHARS: '400',
    TURN_LEASE_MS: '1000',
    ...env,
  });
  const store = new ChatStore(redis, { prefix, maxEvents: 500 });
  const metrics = createMetrics({ defaultMetrics: false });
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line)) });
  const deps = turnDepsFromConfig(config, store, logger, {
    metrics,
    tools,
    providers: { 'openai-compatible': () => customProvider({ languageModels: { mock: model } }) },
  });
  return { deps, store, prompts, metrics, logs };
}

/** The model calls `name` with `input` on its first call, then ends the turn with one chat_send. */
function calls(name: string, input: unknown = {}): Script {
  return (prompt) => {
    const toolTurns = prompt.filter((m) => m.role === 'tool').length;
    const userTurns = prompt.filter((m) => m.role === 'user').length;
    // Once per user message: each turn calls the tool, then answers.
    if (toolTurns < userTurns * 2 - 1) return { toolCalls: [{ name, input }] };
    if (toolTurns < userTurns * 2) return { toolCalls: [{ name: 'chat_send', input: { text: 'done' } }] };
    return { text: '' };
  };
}

/** The committed tool part of the call to `name` (the last one). */
async function toolPart(store: ChatStore, chatKey: string, name: string) {
  const history: ChatMessage[] = await store.readHistory(chatKey);
  return history.flatMap((m) => m.parts).findLast((p) => p.type === `tool-${name}`) as
    | { state: string; toolCallId: string; output?: unknown; errorText?: string }
    | undefined;
}

/** The last message of the model's next request after call `call`: the tool's result as it read it. */
const sawAfter = (prompts: Lane['prompts'], call: number) => JSON.stringify(prompts[call + 1]?.at(-1));

async function ingest(store: ChatStore, chatKey: string, id: string, text = 'go') {
  await store.ingest(
    chatKey,
    userMessage(chatKey, id, text, { channel: 'api', userId: 'u7', username: 'ada' }),
    limits,
  );
}

describe('a tool given in code', () => {
  it('that breaks the name rules stops the worker at start, before it connects, with an error naming it', async () => {
    const config = workerConfig(randomPrefix(LABEL), 'http://model.invalid/v1');
    const impostor = tool({ inputSchema: z.object({}), execute: async () => 'x' });
    const starting = prepareWorker(config, silentLogger(), { tools: { chat_send: impostor } });
    await expect(starting).rejects.toThrow(ConfigError);
    await expect(starting).rejects.toThrow(/"chat_send" clashes with chatlane's own tools/);
  });

  it("gets the chat in options.context: chatKey, runId, the ids of the messages the turn answers (merged ones too), the newest one's sender", async () => {
    const seen: Array<Record<string, unknown>> = [];
    const whoami = tool({
      inputSchema: z.object({}),
      contextSchema: chatlaneToolContextSchema,
      execute: async (_input, { context }) => {
        seen.push({
          chatKey: context.chatKey,
          runId: context.runId,
          messageIds: [...context.messageIds],
          channel: context.channel,
          userId: context.userId,
          username: context.username,
          logs: typeof context.logger.info,
        });
        return 'noted';
      },
    });
    let l: Lane | undefined;
    l = lane({ whoami }, async (_prompt, call) => {
      if (call === 0) {
        // Arrives mid-turn: merged before the next step, where the tool is called.
        await l!.store.ingest(
          'who',
          userMessage('who', 'm3', 'also this', { channel: 'telegram', userId: 'u9' }),
          limits,
        );
        return { toolCalls: [{ name: 'chat_send', input: { text: 'one moment' } }] };
      }
      if (call === 1) return { toolCalls: [{ name: 'whoami', input: {} }] };
      return { text: '' };
    });
    await ingest(l.store, 'who', 'm1');
    await ingest(l.store, 'who', 'm2');
    const outcome = await runTurn(l.deps, 'who');
    expect(outcome).toMatchObject({ status: 'done', consumed: 3, merged: 1 });
    expect(seen).toEqual([
      {
        chatKey: 'who',
        runId: (outcome as { runId: string }).runId,
        messageIds: ['m1', 'm2', 'm3'],
        channel: 'telegram',
        userId: 'u9',
        username: undefined,
        logs: 'function',
      },
    ]);
  });

  it('gives a tool whose contextSchema the chat does not satisfy a tool error the model reads, logged and counted; the turn commits', async () => {
    const shopOnly = tool({
      inputSchema: z.object({}),
      contextSchema: z.object({ chatKey: z.string().startsWith('shop:') }),
      execute: async (_input, { context }) => `hello ${context.chatKey}`,
    });
    const l = lane({ shop_only: shopOnly }, calls('shop_only'));
    await ingest(l.store, 'elsewhere', 'm1');
    expect(await runTurn(l.deps, 'elsewhere')).toMatchObject({ status: 'done', sent: 1 });
    const part = await toolPart(l.store, 'elsewhere', 'shop_only');
    expect(part?.state).toBe('output-error');
    expect(part?.errorText).toContain(
      "shop_only: the chat's context does not satisfy the tool's contextSchema",
    );
    expect(sawAfter(l.prompts, 0)).toContain('does not satisfy');
    const text = await l.metrics.registry.metrics();
    expect(sampleValue(text, 'chatlane_tool_calls_total', { tool: 'shop_only', result: 'error' })).toBe(1);

    // A chat that satisfies it gets the schema's value.
    await ingest(l.store, 'shop:1', 'm1');
    expect(await runTurn(l.deps, 'shop:1')).toMatchObject({ status: 'done' });
    expect(await toolPart(l.store, 'shop:1', 'shop_only')).toMatchObject({
      state: 'output-available',
      output: 'hello shop:1',
    });
  });

  it('past TOOL_TIMEOUT_MS is a tool error the model reads, counted as a timeout; the turn commits', async () => {
    const hang = tool({ inputSchema: z.object({}), execute: () => new Promise<string>(() => undefined) });
    const l = lane({ hang }, calls('hang'));
    await ingest(l.store, 'slow', 'm1');
    expect(await runTurn(l.deps, 'slow')).toMatchObject({ status: 'done', sent: 1 });
    const part = await toolPart(l.store, 'slow', 'hang');
    expect(part).toMatchObject({ state: 'output-error', errorText: 'hang timed out after 300 ms' });
    expect(sawAfter(l.prompts, 0)).toContain('hang timed out after 300 ms');
    const text = await l.metrics.registry.metrics();
    expect(sampleValue(text, 'chatlane_tool_calls_total', { tool: 'hang', result: 'timeout' })).toBe(1);
    expect(sampleValue(text, 'chatlane_tool_call_duration_seconds_count', { tool: 'hang' })).toBe(1);
  });

  it('has a result over TOOL_RESULT_MAX_CHARS cut with a note, in what the model reads and in history', async () => {
    const big = tool({ inputSchema: z.object({}), execute: async () => ({ rows: 'r'.repeat(5000) }) });
    const l = lane({ big }, calls('big'));
    await ingest(l.store, 'big', 'm1');
    expect(await runTurn(l.deps, 'big')).toMatchObject({ status: 'done' });
    const part = await toolPart(l.store, 'big', 'big');
    expect(part?.state).toBe('output-available');
    expect(typeof part?.output).toBe('string');
    expect(String(part?.output).length).toBeLessThanOrEqual(400);
    expect(part?.output).toMatch(/^\{"rows":"rrr/);
    expect(part?.output).toContain(
      '[truncated by chatlane: the tool result was 5011 characters, the limit is 400]',
    );
    expect(sawAfter(l.prompts, 0)).toContain('truncated by chatlane');
  });

  it('that throws is a tool error the model reads, logged with the tool, chat and run, and counted; the turn commits', async () => {
    const boom = tool({
      inputSchema: z.object({}),
      execute: async (): Promise<string> => {
        throw new Error('the ledger is locked');
      },
    });
    const l = lane({ boom }, calls('boom'));
    await ingest(l.store, 'boom', 'm1');
    const outcome = await runTurn(l.deps, 'boom');
    expect(outcome).toMatchObject({ status: 'done', sent: 1 });
    expect(await toolPart(l.store, 'boom', 'boom')).toMatchObject({
      state: 'output-error',
      errorText: 'boom failed: the ledger is locked',
    });
    expect(sawAfter(l.prompts, 0)).toContain('the ledger is locked');
    const line = l.logs.find((e) => e.msg === 'tool call failed');
    expect(line).toMatchObject({
      level: 40,
      tool: 'boom',
      chatKey: 'boom',
      runId: (outcome as { runId: string }).runId,
    });
    expect(String((line?.err as { message?: string })?.message)).toContain('the ledger is locked');
    const text = await l.metrics.registry.metrics();
    expect(sampleValue(text, 'chatlane_tool_calls_total', { tool: 'boom', result: 'error' })).toBe(1);
    expect(sampleValue(text, 'chatlane_tool_calls_total', { tool: 'boom', result: 'ok' })).toBeUndefined();
  });

  it('shows its calls in history and on the reply stream as tool parts, input and output', async () => {
    const lookup = tool({
      inputSchema: z.object({ order: z.string() }),
      execute: async ({ order }) => ({ order, status: 'shipped' }),
    });
    const l = lane({ lookup_order: lookup }, calls('lookup_order', { order: '42' }));
    await ingest(l.store, 'shown', 'm1');
    // Streamed (as a page watching it sees it): the live view is what this test reads.
    const outcome = (await runTurn({ ...l.deps, replyStreaming: 'always' }, 'shown')) as {
      status: string;
      runId: string;
    };
    expect(outcome.status).toBe('done');
    const part = await toolPart(l.store, 'shown', 'lookup_order');
    expect(part).toMatchObject({
      state: 'output-available',
      input: { order: '42' },
      output: { order: '42', status: 'shipped' },
    });
    const chunks = (await l.deps.replies!.read('shown', outcome.runId)).flatMap((e) =>
      e.kind === 'chunk' ? [e.chunk] : [],
    );
    expect(chunks).toContainEqual(
      expect.objectContaining({
        type: 'tool-input-available',
        toolCallId: part!.toolCallId,
        toolName: 'lookup_order',
      }),
    );
    expect(chunks).toContainEqual(
      expect.objectContaining({
        type: 'tool-output-available',
        toolCallId: part!.toolCallId,
        output: { order: '42', status: 'shipped' },
      }),
    );
  });
});

describe('context.once', () => {
  /** A refund tool whose effect is counted outside the turn; `fn` may do more first. */
  function refundTool(effects: string[], before?: (context: ChatlaneToolContext) => Promise<void>) {
    return tool({
      inputSchema: z.object({ order: z.string() }),
      contextSchema: chatlaneToolContextSchema,
      execute: async ({ order }, { context }) =>
        context.once(`refund:${order}`, async ({ attempt }) => {
          await before?.(context);
          effects.push(`${order}#${attempt}`);
          return { refund: `r-${order}`, attempt, effect: effects.length };
        }),
    });
  }

  it('runs fn once across two turns: the second turn gets the stored result and fn does not run', async () => {
    const effects: string[] = [];
    const l = lane({ refund: refundTool(effects) }, calls('refund', { order: '42' }));
    await ingest(l.store, 'twice', 'm1');
    expect(await runTurn(l.deps, 'twice')).toMatchObject({ status: 'done' });
    await ingest(l.store, 'twice', 'm2', 'again please');
    expect(await runTurn(l.deps, 'twice')).toMatchObject({ status: 'done' });
    expect(effects).toEqual(['42#1']);
    const history: ChatMessage[] = await l.store.readHistory('twice');
    const outputs = history.flatMap((m) => m.parts).filter((p) => p.type === 'tool-refund');
    expect(outputs.map((p) => (p as { output?: unknown }).output)).toEqual([
      { refund: 'r-42', attempt: 1, effect: 1 },
      { refund: 'r-42', attempt: 1, effect: 1 },
    ]);
    // The model of the second turn read the stored result.
    expect(sawAfter(l.prompts, 3)).toContain('"effect":1');
    const events = await l.store.readEvents('twice', undefined, 100);
    expect(events.filter((e) => e.type.startsWith('once.')).map((e) => e.type)).toEqual([
      'once.stored',
      'once.reused',
    ]);
  });

  it('shares one run between two calls of a key in one step', async () => {
    const effects: string[] = [];
    const l = lane({ refund: refundTool(effects) }, (_p, call) =>
      call === 0
        ? {
            toolCalls: [
              { name: 'refund', input: { order: '7' } },
              { name: 'refund', input: { order: '7' } },
            ],
          }
        : { text: '' },
    );
    await ingest(l.store, 'pair', 'm1');
    expect(await runTurn(l.deps, 'pair')).toMatchObject({ status: 'done' });
    expect(effects).toEqual(['7#1']);
  });

  it('against a stale fence: fn ran but its result is not stored, the turn stops as lost; the turn taking over runs fn again as attempt 2', async () => {
    const effects: string[] = [];
    let takeOver = true;
    const refund = refundTool(effects, async (context) => {
      // Another worker takes the chat while fn runs (its lease ran out): a new fence.
      if (takeOver) await redis.hincrby(l.store.keys(context.chatKey).meta, 'fence', 1);
      takeOver = false;
    });
    const l = lane({ refund }, calls('refund', { order: '9' }));
    await ingest(l.store, 'stale', 'm1');
    expect(await runTurn(l.deps, 'stale')).toMatchObject({ status: 'lost' });
    expect(effects).toEqual(['9#1']);
    const k = l.store.keys('stale');
    expect(JSON.parse((await redis.hget(k.once, 'refund:9'))!)).toMatchObject({ s: 'run', n: 1 });
    const events = await l.store.readEvents('stale', undefined, 100);
    expect(events.find((e) => e.type === 'fence.rejected')?.data).toMatchObject({ op: 'once' });
    expect(await l.store.pendingCount('stale')).toBe(1);

    // The lost turn's lease runs out (TURN_LEASE_MS); the next turn takes the chat over.
    let next = await runTurn(l.deps, 'stale');
    for (let i = 0; next.status === 'busy' && i < 50; i++) {
      await new Promise((r) => setTimeout(r, 100));
      next = await runTurn(l.deps, 'stale');
    }
    expect(next).toMatchObject({ status: 'done', consumed: 1 });
    expect(effects).toEqual(['9#1', '9#2']);
    expect(await toolPart(l.store, 'stale', 'refund')).toMatchObject({
      output: { refund: 'r-9', attempt: 2, effect: 2 },
    });
  });

  it('a result over ONCE_RESULT_MAX_BYTES: fn ran, the call is a tool error saying so, and fn is not run again', async () => {
    const effects: string[] = [];
    const big = tool({
      inputSchema: z.object({}),
      contextSchema: chatlaneToolContextSchema,
      execute: async (_input, { context }) =>
        context.once('report', async () => {
          effects.push('ran');
          return 'x'.repeat(100);
        }),
    });
    const l = lane({ report: big }, calls('report'), { ONCE_RESULT_MAX_BYTES: '64' });
    await ingest(l.store, 'heavy', 'm1');
    await runTurn(l.deps, 'heavy');
    await ingest(l.store, 'heavy', 'm2');
    await runTurn(l.deps, 'heavy');
    expect(effects).toEqual(['ran']);
    const part = await toolPart(l.store, 'heavy', 'report');
    expect(part?.state).toBe('output-error');
    expect(part?.errorText).toContain('is not run again, but its result was not kept');
    expect(part?.errorText).toContain('over ONCE_RESULT_MAX_BYTES (64)');
  });
});
