import { tool } from 'ai';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type RecordedRequest, type RunningMockLlm, startMockLlm } from '../../src/mock-llm/server.js';
import { silentLogger } from '../../src/shared/logger.js';
import { switchContext } from '../../src/shared/store/contexts.js';
import { writeMemory } from '../../src/shared/store/memory.js';
import { createModel } from '../../src/worker/agent/model.js';
import { prepareCustomTools } from '../../src/worker/agent/tools/custom-tools.js';
import { compactChat } from '../../src/worker/compaction/compact.js';
import { windowStart, windowStep } from '../../src/worker/pipeline/provider.js';
import { applyStages } from '../../src/worker/pipeline/stages.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { retrieving } from '../helpers/rag.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';
import { mockModelConfig } from '../helpers/worker-config.js';

/**
 * The prefix rule (docs/prompt-caching.md) on real turns: real Redis, `runTurn`, the
 * OpenAI-compatible AI SDK provider over HTTP to the project's mock model, which records every
 * request body as sent. Between two turns of a chat the earlier request is a byte-identical
 * prefix of the later one (tools, then messages, system included), unless the chat changed.
 */

const redis = testRedis();
let prefix: string;
let mock: RunningMockLlm;

beforeAll(async () => {
  mock = await startMockLlm({ port: 0 });
});
beforeEach(() => {
  prefix = randomPrefix('pcache');
});
afterEach(() => {
  mock.state.reset();
});
afterAll(async () => {
  await mock.close();
  await deleteLabel(redis, 'pcache');
  redis.disconnect();
});

function deps(settings: Parameters<typeof turnDeps>[3] = {}): TurnDeps {
  const model = createModel(mockModelConfig(mock.url));
  return turnDeps(redis, prefix, model, settings);
}

interface Body {
  tools?: unknown;
  messages: unknown[];
}

const bodyOf = (r: RecordedRequest) => r.body as Body;

/** `before` is a byte-identical prefix of `after`: same tool definitions, and its messages lead `after`'s. */
function isPrefix(before: RecordedRequest, after: RecordedRequest): boolean {
  const a = bodyOf(before);
  const b = bodyOf(after);
  if (JSON.stringify(a.tools ?? []) !== JSON.stringify(b.tools ?? [])) return false;
  if (a.messages.length > b.messages.length) return false;
  return a.messages.every((m, i) => JSON.stringify(m) === JSON.stringify(b.messages[i]));
}

/** One turn answering `text`; the requests it made. */
async function turn(d: TurnDeps, chatKey: string, text: string): Promise<RecordedRequest[]> {
  const seen = mock.state.recorded(chatKey).length;
  await ingestTexts(d.store, chatKey, text);
  expect(await runTurn(d, chatKey)).toMatchObject({ status: 'done' });
  return mock.state.recorded(chatKey).slice(seen);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('requests a prompt cache can reuse', () => {
  it("starts every turn's request with the previous turn's last request, byte for byte, while the clock moves on; the mock serves that prefix as cached", async () => {
    const d = deps();
    const turns: RecordedRequest[][] = [];
    for (const [i, text] of ['hello', 'how are you', 'tell me more', 'and then?', 'thanks'].entries()) {
      // Turns a second and more apart: a clock in the system prompt would differ in every one.
      if (i === 2) await sleep(1100);
      turns.push(await turn(d, 'c1', text));
    }
    for (let t = 1; t < turns.length; t++) {
      const before = turns[t - 1]!.at(-1)!;
      const first = turns[t]![0]!;
      expect(isPrefix(before, first), `turn ${t + 1}`).toBe(true);
      expect(first.cachedTokens).toBe(before.promptTokens);
      // Within the turn too: each step extends the one before.
      for (let s = 1; s < turns[t]!.length; s++)
        expect(isPrefix(turns[t]![s - 1]!, turns[t]![s]!)).toBe(true);
    }
    // The newest user message carries its own time and sender, after the whole history.
    const last = bodyOf(turns.at(-1)![0]!).messages.at(-1) as { role: string; content: string };
    expect(last.role).toBe('user');
    expect(last.content).toMatch(/^\[sent \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\]\nthanks$/);
  });

  it("keeps the prefix with a Provider that adds retrieved documents: each turn's document rides on its message, after the history, and stays there", async () => {
    const rag = retrieving((query) => [{ text: `Notes found for "${query}".`, source: 'notes.md' }]);
    const d = deps();
    Object.assign(d, applyStages(d, { provider: rag.wrap }));
    const turns: RecordedRequest[][] = [];
    for (const text of ['hello', 'where is my order', 'and the invoice?', 'thanks'])
      turns.push(await turn(d, 'c1', text));
    for (let t = 1; t < turns.length; t++) {
      const before = turns[t - 1]!.at(-1)!;
      const first = turns[t]![0]!;
      expect(isPrefix(before, first), `turn ${t + 1}`).toBe(true);
      expect(first.cachedTokens).toBe(before.promptTokens);
    }
    // Every turn's question carries its own document, the newest one last in the request.
    const body = JSON.stringify(bodyOf(turns.at(-1)![0]!).messages);
    for (const text of ['hello', 'where is my order', 'and the invoice?', 'thanks'])
      expect(body).toContain(JSON.stringify(`Notes found for "${text}".`).slice(1, -1));
    expect(rag.queries).toEqual(['hello', 'where is my order', 'and the invoice?', 'thanks']);
  });

  it('keeps the prefix across a lane merge: the next turn starts with the merging turn, merged message included', async () => {
    const d = deps();
    await turn(d, 'c1', 'first');
    mock.state.hold('c1');
    const seen = mock.state.recorded('c1').length;
    await ingestTexts(d.store, 'c1', 'second');
    const running = runTurn(d, 'c1');
    await mock.state.waitForRequest('c1', seen + 1);
    // Arrives while the model works: merged into the running turn at its next step.
    await ingestTexts(d.store, 'c1', 'arrived mid-turn');
    mock.state.release('c1');
    expect(await running).toMatchObject({ status: 'done', consumed: 2 });
    const merging = mock.state.recorded('c1').slice(seen);
    expect(JSON.stringify(bodyOf(merging.at(-1)!).messages)).toContain('arrived mid-turn');
    const next = await turn(d, 'c1', 'third');
    expect(isPrefix(merging.at(-1)!, next[0]!)).toBe(true);
  });

  it('moves the history window in steps: between steps each turn extends the one before, the window never exceeds HISTORY_WINDOW_MESSAGES', async () => {
    const size = 12;
    const step = windowStep(size);
    expect(step).toBe(3);
    const d = deps({ windowMessages: size });
    const starts: number[] = [];
    const turns: RecordedRequest[][] = [];
    for (let t = 0; t < 14; t++) {
      const total = (await d.store.readHistory('c1')).length;
      starts.push(windowStart(total, size, step));
      turns.push(await turn(d, 'c1', `message ${t}`));
    }
    let kept = 0;
    let broken = 0;
    for (let t = 1; t < turns.length; t++) {
      const holds = isPrefix(turns[t - 1]!.at(-1)!, turns[t]![0]!);
      // The prefix breaks exactly where the window's start moved, never elsewhere.
      expect(holds, `turn ${t + 1}`).toBe(starts[t] === starts[t - 1]);
      if (holds) kept++;
      else broken++;
      // The stored history alternates user and assistant messages: a window of at most `size`
      // holds at most size / 2 user messages, and the turn adds its own.
      const users = bodyOf(turns[t]![0]!).messages.filter((m) => (m as { role: string }).role === 'user');
      expect(users.length).toBeLessThanOrEqual(size / 2 + 1);
    }
    // A window sliding by one message per turn would break every pair once it is full.
    expect(broken).toBeGreaterThan(0);
    expect(kept).toBeGreaterThan(broken);
  });

  it("keeps the prefix with tools given in code: they follow chatlane's own in the order given, the same in every turn, calls to them included", async () => {
    const d = deps();
    const given = {
      zeta_lookup: tool({
        description: 'Look up an order.',
        inputSchema: z.object({ order: z.string() }),
        execute: async ({ order }) => ({ order, status: 'shipped' }),
      }),
      alpha_note: tool({
        description: 'Take a note.',
        inputSchema: z.object({}),
        execute: async () => 'noted',
      }),
    };
    d.customTools = prepareCustomTools(given, { timeoutMs: 5000, resultMaxChars: 2000 });
    const turns: RecordedRequest[][] = [];
    for (const text of ['hello', 'tool: zeta_lookup {"order":"42"}', 'thanks', 'tool: alpha_note', 'bye']) {
      turns.push(await turn(d, 'c1', text));
    }
    const first = turns[0]![0]!.tools;
    expect(first.slice(-2)).toEqual(['zeta_lookup', 'alpha_note']);
    expect(first.slice(0, -2).every((n) => n.startsWith('chat_'))).toBe(true);
    for (const r of turns.flat()) expect(r.tools).toEqual(first);
    // The tool-calling turns called the tool given in code and answered with what it returned.
    expect(JSON.stringify(bodyOf(turns[1]!.at(-1)!).messages)).toContain('shipped');
    for (let t = 1; t < turns.length; t++) {
      expect(isPrefix(turns[t - 1]!.at(-1)!, turns[t]![0]!), `turn ${t + 1}`).toBe(true);
      for (let s = 1; s < turns[t]!.length; s++)
        expect(isPrefix(turns[t]![s - 1]!, turns[t]![s]!)).toBe(true);
    }
  });

  it('breaks the prefix on purpose when the chat changes (compaction, context switch, memory update), and holds it again on the turn after', async () => {
    const d = deps();
    for (const text of ['one', 'two', 'three', 'four']) await turn(d, 'c1', text);
    const changes: Record<string, () => Promise<unknown>> = {
      compaction: async () => {
        const summarizer = createModel(mockModelConfig(mock.url));
        const settings = {
          keepLast: 2,
          keepRecentTokens: 0,
          maxOutputTokens: 300,
          archive: true,
          maxEvents: 500,
          maxCharsPerMessage: 4000,
        };
        const compactDeps = {
          store: d.store,
          model: summarizer,
          modelName: 'mock',
          logger: silentLogger(),
          settings,
        };
        expect(await compactChat(compactDeps, 'c1')).toMatchObject({ status: 'applied' });
      },
      'context switch': async () => {
        const lease = await d.store.acquire('c1', 'op', 5000);
        if (!lease.ok) throw new Error('busy');
        await switchContext(d.store, 'c1', lease.fence, { op: 'new', runId: 'op-1' });
        await d.store.finish('c1', lease.fence, 'op', 'op-1');
      },
      'memory update': () =>
        writeMemory(d.store, 'c1', { content: 'likes tea', fence: undefined, runId: 'op-2', maxTokens: 100 }),
    };
    for (const [name, change] of Object.entries(changes)) {
      const before = await turn(d, 'c1', `before ${name}`);
      await change();
      const after = await turn(d, 'c1', `after ${name}`);
      expect(isPrefix(before.at(-1)!, after[0]!), name).toBe(false);
      const next = await turn(d, 'c1', `next after ${name}`);
      expect(isPrefix(after.at(-1)!, next[0]!), `${name}, the turn after`).toBe(true);
    }
  });
});
