import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ChatUsage } from '../../src/shared/store/usage.js';
import { postMessage } from '../helpers/processes.js';
import { sampleValue } from '../helpers/prom.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'chatlane-usage-e2e-'));
const prices = join(dir, 'prices.yaml');
writeFileSync(prices, 'models:\n  mock: { input: 1, output: 2 }\n');
const NOTICE = 'Out of tokens for today.';

/** Real ingress and worker processes with a price file and a daily budget one turn uses up. */
describe('usage, cost and the daily budget across real processes', () => {
  const stack = useStack('e2e-usage', {
    roles: ['ingress', 'worker'],
    env: {
      MODEL_PRICES_FILE: prices,
      CHAT_DAILY_TOKEN_BUDGET: '1',
      BUDGET_NOTICE: NOTICE,
      METRICS_PORT: '0',
    },
  });

  it('a turn is counted per model with its cost; the chat then gets one notice and no more model calls', async () => {
    const chat = 'usage-e2e';
    const outbox = () => stack.store.readOutbox(chat, undefined, 20);
    await postMessage(stack.ingressUrl(), chat, 'u1', 'hello');
    await waitFor(async () => (await outbox()).length === 1, { what: 'the first reply' });
    await waitFor(async () => (await stack.store.readHistory(chat)).length >= 2, { what: 'the commit' });
    const calls = stack.mock.state.perChat[chat];
    expect(calls).toBeGreaterThan(0);

    const res = await fetch(`${stack.ingressUrl()}/v1/chats/${chat}/usage`);
    expect(res.status).toBe(200);
    const usage = (await res.json()) as ChatUsage & { dailyTokenBudget?: number };
    expect(usage.dailyTokenBudget).toBe(1);
    expect(usage.byModel).toHaveLength(1);
    const mock = usage.byModel[0]!;
    expect(mock).toMatchObject({ model: 'openai-compatible:mock', calls });
    expect(mock.inputTokens).toBeGreaterThan(0);
    expect(mock.cost).toBeCloseTo((mock.inputTokens * 1 + mock.outputTokens * 2) / 1e6, 12);
    expect(usage.total.unpriced).toEqual([]);
    expect(usage.byDay[0]?.budgetTokens).toBe(mock.inputTokens + mock.outputTokens);

    await postMessage(stack.ingressUrl(), chat, 'u2', 'are you there?');
    await waitFor(async () => (await outbox()).length === 2, { what: 'the notice' });
    await postMessage(stack.ingressUrl(), chat, 'u3', 'hello?');
    await waitFor(async () => (await stack.store.readHistory(chat)).some((m) => m.id === 'u3'), {
      what: 'the third message kept in history',
    });
    expect((await stack.store.readHistory(chat)).map((m) => m.id)).toEqual(
      expect.arrayContaining(['u2', 'u3']),
    );
    expect(await stack.store.pendingCount(chat)).toBe(0);
    const items = await outbox();
    expect(items.map((i) => i.text).at(-1)).toBe(NOTICE);
    expect(items.at(-1)?.notice).toBe('budget');
    expect(items).toHaveLength(2);
    expect(stack.mock.state.perChat[chat]).toBe(calls);

    const worker = stack.procs.find((p) => p.logs.some((l) => l.msg === 'worker started'))!;
    const metricsUrl = String(worker.logs.find((l) => l.msg === 'worker started')?.metricsUrl);
    const text = await (await fetch(`${metricsUrl}/metrics`)).text();
    expect(
      sampleValue(text, 'chatlane_model_tokens_total', { model: 'openai-compatible:mock', kind: 'input' }),
    ).toBe(mock.inputTokens);
    expect(
      sampleValue(text, 'chatlane_model_cost_usd_total', { model: 'openai-compatible:mock' }),
    ).toBeCloseTo(mock.cost ?? Number.NaN, 12);
    expect(sampleValue(text, 'chatlane_turn_duration_seconds_count', { outcome: 'held' })).toBe(2);
  });
});
