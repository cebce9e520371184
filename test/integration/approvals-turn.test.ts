import { customProvider, tool } from 'ai';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { createMetrics } from '../../src/shared/metrics.js';
import { answerApproval, listApprovals } from '../../src/shared/store/approvals.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../../src/worker/turn/turn-deps.js';
import { userMessage } from '../helpers/messages.js';
import { sampleValue } from '../helpers/prom.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { newUserTexts, type Script, scriptedModel } from '../helpers/scripted-model.js';
import { workerConfig } from '../helpers/worker-config.js';

/**
 * Tool approval on real turns (docs/approvals.md): real Redis, the worker's own wiring
 * (`turnDepsFromConfig` with TOOL_APPROVAL), an `ai/test` model. A call that needs a person
 * ends its turn with the call waiting; the answer, stored once, makes the next turn run the
 * approved call (once) or record the denial, and the model goes on. Expiry and a new message
 * settle an open request too.
 */

const LABEL = 'apprturn';
const redis = testRedis();
const limits = { maxPending: 100, dedupWindowMs: 60_000 };

afterAll(async () => {
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

/** The model: "refund <id>" → the refund tool; its result (or denial) → chat_send saying it; else echo. */
const script: Script = (prompt) => {
  const last = prompt.at(-1);
  if (last?.role === 'tool') {
    const results = last.content.filter((p) => p.type === 'tool-result');
    const refund = results.find((p) => p.toolName === 'refund');
    if (refund)
      return {
        toolCalls: [{ name: 'chat_send', input: { text: `refund: ${JSON.stringify(refund.output)}` } }],
      };
    return { text: '' };
  }
  const said = newUserTexts(prompt).at(-1) ?? '';
  const m = /^refund (\w+)/.exec(said);
  if (m) return { toolCalls: [{ name: 'refund', input: { order: m[1] } }] };
  return { toolCalls: [{ name: 'chat_send', input: { text: `echo: ${said}` } }] };
};

interface Chat {
  deps: TurnDeps;
  store: ChatStore;
  chatKey: string;
  runs: string[];
  metrics: ReturnType<typeof createMetrics>;
  prompts: ReturnType<typeof scriptedModel>['prompts'];
}

function chat(env: Record<string, string> = {}): Chat {
  const prefix = randomPrefix(LABEL);
  const { model, prompts } = scriptedModel(script);
  const runs: string[] = [];
  const refund = tool({
    inputSchema: z.object({ order: z.string() }),
    execute: async ({ order }) => {
      runs.push(order);
      return { refunded: order };
    },
  });
  const config = workerConfig(prefix, 'http://model.invalid/v1', {
    TOOL_APPROVAL: 'refund=user',
    TURN_LEASE_MS: '2000',
    ...env,
  });
  const store = new ChatStore(redis, { prefix, maxEvents: 500 });
  const metrics = createMetrics({ defaultMetrics: false });
  const deps = turnDepsFromConfig(config, store, silentLogger(), {
    metrics,
    tools: { refund },
    providers: { 'openai-compatible': () => customProvider({ languageModels: { mock: model } }) },
  });
  return { deps, store, chatKey: 'c1', runs, metrics, prompts };
}

async function say(c: Chat, id: string, text: string) {
  await c.store.ingest(c.chatKey, userMessage(c.chatKey, id, text, { userId: 'u1' }), limits);
}

const toolParts = (history: ChatMessage[], name: string) =>
  history.flatMap((m) => m.parts).filter((p) => p.type === `tool-${name}`) as Array<{
    state: string;
    toolCallId: string;
    output?: unknown;
    approval?: { id: string; approved?: boolean; reason?: string };
  }>;

const events = async (c: Chat, type: string) =>
  (await c.store.readEvents(c.chatKey, undefined, 500)).filter((e) => e.type === type).map((e) => e.data);

describe('a tool call that needs approval', () => {
  it('ends its turn with the call waiting, and an approval makes the next turn run it once and go on', async () => {
    const c = chat();
    await say(c, 'm1', 'refund 42');
    const first = await runTurn(c.deps, c.chatKey);
    expect(first.status).toBe('done');
    expect(c.runs).toEqual([]);
    let history = await c.store.readHistory(c.chatKey);
    const [waiting] = toolParts(history, 'refund');
    expect(waiting).toMatchObject({ state: 'approval-requested', approval: { id: expect.any(String) } });
    const id = waiting!.approval!.id;
    const [requested] = await events(c, 'approval.requested');
    expect(requested).toMatchObject({ approvalId: id, tool: 'refund', input: { order: '42' } });
    const [open] = await listApprovals(c.store, c.chatKey);
    expect(open).toMatchObject({ state: 'open', request: { id, tool: 'refund', people: ['u1'] } });

    const answer = await answerApproval(
      c.store,
      c.chatKey,
      id,
      { approved: true, by: 'api' },
      { supersede: true },
    );
    expect(answer.status).toBe('accepted');
    const second = await runTurn(c.deps, c.chatKey);
    expect(second.status).toBe('done');
    expect(c.runs).toEqual(['42']);
    history = await c.store.readHistory(c.chatKey);
    expect(toolParts(history, 'refund')).toEqual([
      expect.objectContaining({
        state: 'output-available',
        output: { refunded: '42' },
        approval: expect.objectContaining({ id, approved: true }),
      }),
    ]);
    // The model went on from the result, in the message that asked.
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
    const sent = history[1]!.parts.find((p) => p.type === 'tool-chat_send') as { input: { text: string } };
    expect(sent.input.text).toBe('refund: {"type":"json","value":{"refunded":"42"}}');
    expect(await events(c, 'approval.resolved')).toEqual([
      expect.objectContaining({ approvalId: id, outcome: 'approved', by: 'api' }),
    ]);
    expect(await c.store.pendingCount(c.chatKey)).toBe(0);
    expect(
      sampleValue(await c.metrics.registry.metrics(), 'chatlane_tool_approvals_total', {
        tool: 'refund',
        outcome: 'approved',
      }),
    ).toBe(1);

    // A second answer changes nothing.
    const again = await answerApproval(
      c.store,
      c.chatKey,
      id,
      { approved: false, by: 'api' },
      { supersede: true },
    );
    expect(again.status).toBe('resolved');
    expect(await runTurn(c.deps, c.chatKey)).toMatchObject({ status: 'idle' });
    expect(c.runs).toEqual(['42']);
  });
});
