import { describe, expect, it } from 'vitest';
import { textOf } from '../helpers/messages.js';
import { postMessage } from '../helpers/processes.js';
import { sampleValue } from '../helpers/prom.js';
import { waitFor } from '../helpers/redis.js';
import { type Stack, useStack } from '../helpers/stack.js';

/**
 * Each provider end to end: real chatlane processes whose models are `provider:model`, through
 * the provider's real AI SDK package, against the mock model speaking that provider's wire
 * protocol. A full turn with chat_send, a lane merge, a compaction (COMPACTION_MODEL of the same
 * provider), and a fallback from the first model to the next on an outage (also one that breaks
 * an opened stream before its content) but not on a refusal.
 */

interface Provider {
  name: 'openai' | 'anthropic' | 'google';
  protocol: string;
  env: (mockUrl: string) => Record<string, string>;
}

const origin = (mockUrl: string) => mockUrl.replace(/\/v1$/, '');

const PROVIDERS: Provider[] = [
  {
    name: 'openai',
    protocol: 'responses',
    env: (url) => ({ OPENAI_API_KEY: 'test-openai', OPENAI_BASE_URL: url }),
  },
  {
    name: 'anthropic',
    protocol: 'anthropic-messages',
    env: (url) => ({ ANTHROPIC_API_KEY: 'test-anthropic', ANTHROPIC_BASE_URL: url }),
  },
  {
    name: 'google',
    protocol: 'gemini',
    env: (url) => ({
      GOOGLE_GENERATIVE_AI_API_KEY: 'test-google',
      GOOGLE_GENERATIVE_AI_BASE_URL: `${origin(url)}/v1beta`,
    }),
  },
];

const MAX_INPUT_TOKENS = 1500;

async function committedEvents(stack: Stack, chatKey: string) {
  return (await stack.store.readEvents(chatKey, undefined, 1000)).filter((e) => e.type === 'turn.committed');
}

async function outboxTexts(stack: Stack, chatKey: string): Promise<string[]> {
  return (await stack.store.readOutbox(chatKey, undefined, 100)).map((o) => o.text);
}

async function answered(stack: Stack, chatKey: string, count: number): Promise<void> {
  await waitFor(
    async () =>
      (await stack.store.pendingCount(chatKey)) === 0 &&
      (await committedEvents(stack, chatKey)).length >= count,
    { what: `${chatKey}: ${count} turn(s) committed`, timeoutMs: 20_000 },
  );
}

/** The side ports of the worker and the compactor (both may compact: the worker inline, on an overflow). */
function metricsUrls(stack: Stack): string[] {
  return stack.procs
    .flatMap((p) => p.logs)
    .filter((l) => l.msg === 'worker started' || l.msg === 'compactor started')
    .map((l) => String(l.metricsUrl).replace('0.0.0.0', '127.0.0.1'));
}

function workerMetricsUrl(stack: Stack): string {
  const started = stack.procs.flatMap((p) => p.logs).find((l) => l.msg === 'worker started');
  return String(started?.metricsUrl).replace('0.0.0.0', '127.0.0.1');
}

describe.each(PROVIDERS)('the $name provider end to end', (provider) => {
  const primary = `${provider.name}:mock-primary`;
  const backup = `${provider.name}:mock-backup`;
  const compactor = `${provider.name}:mock-compact`;
  const stack = useStack(`e2e-${provider.name}`, {
    roles: [],
    env: { MAX_INPUT_TOKENS: String(MAX_INPUT_TOKENS), HISTORY_KEEP_LAST_MESSAGES: '10' },
  });

  it('starts ingress, worker and compactor with provider:model and their fallback', async () => {
    // The mock's URL is known only now; LLM_BASE_URL stays unset: no model here needs it.
    const env = {
      ...provider.env(stack.mock.url),
      LLM_BASE_URL: '',
      LLM_MODEL: primary,
      LLM_FALLBACK_MODELS: backup,
      COMPACTION_MODEL: compactor,
    };
    Object.assign(stack.env, env);
    for (const role of ['ingress', 'worker', 'compactor'] as const) await stack.start(role);
    const started = stack.procs.flatMap((p) => p.logs).find((l) => l.msg === 'worker started');
    expect(started?.models).toEqual([primary, backup]);
  }, 60_000);

  it('answers a message through chat_send in its wire protocol, the committed turn naming the model of each step', async () => {
    await postMessage(stack.ingressUrl(), 'turn', 't1', 'hello there');
    await answered(stack, 'turn', 1);
    expect(await outboxTexts(stack, 'turn')).toEqual(['echo: hello there']);
    const requests = stack.mock.state.recorded('turn');
    expect(requests.map((r) => [r.protocol, r.model])).toEqual([
      [provider.protocol, 'mock-primary'],
      [provider.protocol, 'mock-primary'],
    ]);
    expect(requests[0]?.tools).toContain('chat_send');
    const [event] = await committedEvents(stack, 'turn');
    expect(event?.data).toMatchObject({ steps: 2, models: [primary, primary], sent: 1 });
    expect(Number(event?.data.inputTokens)).toBeGreaterThan(0);
  }, 30_000);

  it('merges a message that arrives mid-turn into that turn', async () => {
    const { state } = stack.mock;
    state.hold('merge');
    await postMessage(stack.ingressUrl(), 'merge', 'm1', 'book a table');
    await state.waitForRequest('merge', 1);
    await postMessage(stack.ingressUrl(), 'merge', 'm2', 'for four people');
    state.release('merge');
    await answered(stack, 'merge', 1);

    // The second request of the same turn carries the new message after the tool result.
    const second = JSON.stringify(state.recorded('merge')[1]?.messages);
    expect(second).toContain('for four people');
    expect(second.indexOf('for four people')).toBeGreaterThan(second.indexOf('echo: book a table'));
    const history = await stack.store.readHistory('merge');
    expect(history.map((m) => (m.role === 'user' ? `user:${textOf(m)}` : 'assistant'))).toEqual([
      'user:book a table',
      'assistant',
      'user:for four people',
      'assistant',
    ]);
    expect(await committedEvents(stack, 'merge')).toHaveLength(1);
    expect(await outboxTexts(stack, 'merge')).toEqual(['echo: book a table', 'echo: for four people']);
  }, 30_000);

  it('compacts a long chat with COMPACTION_MODEL through the same provider', async () => {
    const chat = 'long';
    for (let batch = 0; batch < 5; batch++) {
      for (let i = batch * 8; i < batch * 8 + 8; i++) {
        await postMessage(
          stack.ingressUrl(),
          chat,
          `l${i}`,
          `message ${i}: the user talks about subject ${i} at some length, with details ${i * 7} and more`,
        );
      }
      await waitFor(async () => (await stack.store.pendingCount(chat)) === 0, {
        what: `batch ${batch} consumed`,
        timeoutMs: 20_000,
      });
    }
    await waitFor(
      async () =>
        (await stack.store.readEvents(chat, undefined, 1000)).some((e) => e.type === 'compaction.applied'),
      { what: 'a compaction applied', timeoutMs: 30_000 },
    );
    const summaries = stack.mock.state.recorded().filter((r) => r.model === 'mock-compact');
    expect(summaries.length).toBeGreaterThan(0);
    expect(summaries.every((r) => r.protocol === provider.protocol)).toBe(true);
    const history = await stack.store.readHistory(chat);
    expect(history[0]?.metadata.kind).toBe('summary');
    expect(textOf(history[0]!)).toContain('## Summary');
    for (const r of stack.mock.state.recorded(chat))
      expect(r.promptTokens).toBeLessThanOrEqual(MAX_INPUT_TOKENS);

    // Every summary is counted under COMPACTION_MODEL, the model that served it, not LLM_MODEL:
    // on its event, in the chat's usage and in the token counters of the processes that compacted.
    const summarized = async () => {
      const events = (await stack.store.readEvents(chat, undefined, 1000)).filter(
        (e) => e.type === 'compaction.applied' || e.type === 'compaction.discarded',
      );
      return events.map((e) => ({
        model: e.data.model,
        calls: e.data.calls as Array<{ m: string; i: number }>,
      }));
    };
    const counted = async () => {
      const usage = (await (await fetch(`${stack.ingressUrl()}/v1/chats/${chat}/usage`)).json()) as {
        byModel: Array<{ model: string; calls: number; inputTokens: number }>;
      };
      let metered = 0;
      for (const url of metricsUrls(stack)) {
        const text = await (await fetch(`${url}/metrics`)).text();
        metered += sampleValue(text, 'chatlane_model_tokens_total', { model: compactor, kind: 'input' }) ?? 0;
      }
      return { byModel: usage.byModel, metered };
    };
    // A compaction enqueued by a later commit may still be running: wait until the counts agree.
    const settled = await waitFor(
      async () => {
        const events = await summarized();
        const { byModel, metered } = await counted();
        const calls = events.flatMap((e) => e.calls);
        const row = byModel.find((m) => m.model === compactor);
        const input = calls.reduce((n, c) => n + c.i, 0);
        return (
          row?.calls === calls.length && row.inputTokens === input && metered === input && { events, byModel }
        );
      },
      { what: 'compaction usage counted under COMPACTION_MODEL', timeoutMs: 20_000 },
    );
    expect(settled.events.length).toBeGreaterThan(0);
    for (const e of settled.events) {
      expect(e.model).toBe(compactor);
      expect(e.calls.map((c) => c.m)).toEqual([compactor]);
    }
    expect(settled.byModel.map((m) => m.model).sort()).toEqual([compactor, primary].sort());
  }, 90_000);

  it('falls back to the next model on an outage (503, and 429 after its retries), and shows the model down', async () => {
    const { state } = stack.mock;
    state.failNext({
      model: 'mock-primary',
      count: 1000,
      status: 503,
      message: 'overloaded',
      code: 'server_error',
    });
    await postMessage(stack.ingressUrl(), 'outage', 'o1', 'are you there');
    await answered(stack, 'outage', 1);
    expect(await outboxTexts(stack, 'outage')).toEqual(['echo: are you there']);
    const [event] = await committedEvents(stack, 'outage');
    expect(event?.data).toMatchObject({ models: [backup, backup] });

    const metrics = workerMetricsUrl(stack);
    const ready = (await (await fetch(`${metrics}/readyz`)).json()) as {
      models: Record<string, { status: string }>;
    };
    expect(ready.models[primary]).toMatchObject({ status: 'failing', kind: 'server' });
    expect(ready.models[backup]).toEqual({ status: 'ok' });
    const text = await (await fetch(`${metrics}/metrics`)).text();
    expect(sampleValue(text, 'chatlane_model_up', { model: primary })).toBe(0);
    expect(sampleValue(text, 'chatlane_model_up', { model: backup })).toBe(1);
    expect(sampleValue(text, 'chatlane_model_fallbacks_total', { model: primary })).toBeGreaterThan(0);

    // A rate limit: the same model is retried twice (as its answer asks), then the next one
    // serves the step; the step after that is the first model's again, which is back.
    state.reset();
    state.failNext({
      model: 'mock-primary',
      count: 3,
      status: 429,
      message: 'slow down',
      code: 'rate_limit_exceeded',
      retryAfterMs: 10,
    });
    await postMessage(stack.ingressUrl(), 'limited', 'r1', 'hi again');
    await answered(stack, 'limited', 1);
    expect(state.recorded('limited').map((r) => r.model)).toEqual([
      'mock-primary',
      'mock-primary',
      'mock-primary',
      'mock-backup',
      'mock-primary',
    ]);
    const [limited] = await committedEvents(stack, 'limited');
    expect(limited?.data).toMatchObject({ models: [backup, primary] });
    const after = (await (await fetch(`${metrics}/readyz`)).json()) as {
      models: Record<string, { status: string }>;
    };
    expect(after.models[primary]).toEqual({ status: 'ok' });
  }, 30_000);

  it('falls back when an opened response fails before any content (an error in it, a cut connection)', async () => {
    const { state } = stack.mock;
    const metrics = workerMetricsUrl(stack);
    const fallbacks = async () =>
      sampleValue(await (await fetch(`${metrics}/metrics`)).text(), 'chatlane_model_fallbacks_total', {
        model: primary,
      }) ?? 0;
    for (const midStream of ['error', 'drop'] as const) {
      state.reset();
      const before = await fallbacks();
      const chat = `mid-${midStream}`;
      state.failNext({
        model: 'mock-primary',
        count: 1,
        status: 503,
        message: 'overloaded',
        code: 'server_error',
        midStream,
      });
      await postMessage(stack.ingressUrl(), chat, `${chat}-1`, 'still there?');
      await answered(stack, chat, 1);
      expect(await outboxTexts(stack, chat)).toEqual(['echo: still there?']);
      // The first step failed on the primary and went to the backup; the next step is the
      // primary's again. Nobody watches an API chat: its turn asks without streaming.
      expect(state.recorded(chat).map((r) => [r.model, r.stream])).toEqual([
        ['mock-primary', false],
        ['mock-backup', false],
        ['mock-primary', false],
      ]);
      const [event] = await committedEvents(stack, chat);
      expect(event?.data).toMatchObject({ steps: 2, models: [backup, primary] });
      expect(await fallbacks()).toBe(before + 1);
    }
  }, 30_000);

  it('does not fall back when the model refuses the content (400): the message fails with the notice', async () => {
    const { state } = stack.mock;
    state.reset();
    state.failNext({
      contains: 'forbidden words',
      count: 1000,
      status: 400,
      message: 'content refused',
      code: 'refused',
    });
    await postMessage(stack.ingressUrl(), 'refused', 'f1', 'some forbidden words');
    await waitFor(async () => (await outboxTexts(stack, 'refused')).length === 1, {
      what: 'failure notice',
      timeoutMs: 20_000,
    });
    expect((await outboxTexts(stack, 'refused'))[0]).toContain("couldn't process your last message");
    expect(state.recorded('refused').map((r) => r.model)).toEqual(['mock-primary']);
  }, 30_000);
});
