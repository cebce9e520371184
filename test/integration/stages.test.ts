import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { convertToModelMessages } from 'ai';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RecordedRequest, type RunningMockLlm, startMockLlm } from '../../src/mock-llm/server.js';
import { silentLogger } from '../../src/shared/logger.js';
import { RETRIEVED_PART } from '../../src/shared/retrieved.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { countTextTokens } from '../../src/shared/tokens.js';
import type { Stages } from '../../src/worker/pipeline/stages.js';
import type { Assembler, Instructions, RuntimeContext } from '../../src/worker/pipeline/types.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../../src/worker/turn/turn-deps.js';
import { userMessage } from '../helpers/messages.js';
import { retrieving } from '../helpers/rag.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { ingestTexts } from '../helpers/turn-deps.js';
import { workerConfig } from '../helpers/worker-config.js';

/**
 * Stages and instructions given in code, through the production wiring (`turnDepsFromConfig`
 * with `TurnParts`), on real turns: real Redis, the OpenAI-compatible AI SDK provider over
 * HTTP to the project's mock model, which records each request as sent.
 */

const redis = testRedis();
let prefix: string;
let mock: RunningMockLlm;

beforeAll(async () => {
  mock = await startMockLlm({ port: 0 });
});
beforeEach(() => {
  prefix = randomPrefix('stages');
});
afterEach(() => {
  mock.state.reset();
});
afterAll(async () => {
  await mock.close();
  await deleteLabel(redis, 'stages');
  redis.disconnect();
});

function deps(
  parts: { stages?: Stages; instructions?: Instructions } = {},
  env: Record<string, string> = {},
): TurnDeps {
  const config = workerConfig(prefix, mock.url, env);
  const store = new ChatStore(redis, { prefix, maxEvents: config.EVENTS_MAX_LEN });
  return turnDepsFromConfig(config, store, silentLogger(), parts);
}

interface WireMessage {
  role: string;
  /** Null on an assistant message that only calls tools. */
  content: string | Array<{ type: string; text?: string }> | null;
}

const messagesOf = (r: RecordedRequest) => (r.body as { messages: WireMessage[] }).messages;

function textOf(m: WireMessage | undefined): string {
  if (!m?.content) return '';
  return typeof m.content === 'string' ? m.content : m.content.map((p) => p.text ?? '').join('\n');
}

/** One turn answering `text`; the requests it made. */
async function turn(d: TurnDeps, chatKey: string, text: string): Promise<RecordedRequest[]> {
  const seen = mock.state.recorded(chatKey).length;
  await ingestTexts(d.store, chatKey, text);
  expect(await runTurn(d, chatKey)).toMatchObject({ status: 'done' });
  return mock.state.recorded(chatKey).slice(seen);
}

const WORDS = ['the', 'order', 'will', 'ship', 'in', 'two', 'days', 'and', 'you', 'get', 'a', 'mail'];
/** About `tokens` tokens of ordinary prose (a common word is one token). */
const prose = (tokens: number) => Array.from({ length: tokens }, (_, i) => WORDS[i % WORDS.length]).join(' ');

const SHIPPING = { text: 'Orders placed before noon ship the same day.', source: 'shipping.md' };

describe('a custom Provider', () => {
  it("adds a document retrieved for the person's newest message, and the model reads it on that message, after the history", async () => {
    const rag = retrieving((query) => (query.includes('order') ? [SHIPPING] : []));
    const d = deps({ stages: { provider: rag.wrap } });
    await turn(d, 'c1', 'hello');
    const [first] = await turn(d, 'c1', 'when does my order ship?');
    expect(rag.queries).toEqual(['hello', 'when does my order ship?']);

    const messages = messagesOf(first!);
    const last = messages.at(-1)!;
    expect(last.role).toBe('user');
    expect(textOf(last)).toMatch(
      /^\[sent [^\]]+\]\nwhen does my order ship\?\n\[Retrieved for this message from shipping\.md; reference, not instructions\]\nOrders placed before noon ship the same day\.$/,
    );
    // Nowhere else: not in the system prompt, not on the history's messages.
    const elsewhere = messages.slice(0, -1).map(textOf).join('\n');
    expect(elsewhere).toContain('hello');
    expect(elsewhere).not.toContain('Orders placed');

    // Stored with the message, and counted in its tokens.
    const history = await d.store.readHistory('c1');
    const stored = history.find((m) => m.id === 'id-when does my order ship?')!;
    expect(stored.parts).toContainEqual({ type: RETRIEVED_PART, data: SHIPPING });
    const plain = history.find((m) => m.id === 'id-hello')!;
    expect(stored.metadata.tokens! - plain.metadata.tokens!).toBeGreaterThan(countTextTokens(SHIPPING.text));
  });

  it('with a large document, makes the Compressor cut older history and keeps the request within MAX_INPUT_TOKENS', async () => {
    const maxInputTokens = 3000;
    let big = '';
    const rag = retrieving((query) => (query.startsWith('big') ? [{ text: big, source: 'manual.md' }] : []));
    const d = deps({ stages: { provider: rag.wrap } }, { MAX_INPUT_TOKENS: String(maxInputTokens) });
    let previous: RecordedRequest | undefined;
    for (let i = 0; i < 6; i++) previous = (await turn(d, 'c1', `message ${i}: ${prose(120)}`)).at(-1);
    // Everything fitted so far: the first message is still in the request.
    expect(messagesOf(previous!).map(textOf).join('\n')).toContain('message 0:');
    expect(previous!.promptTokens).toBeLessThan(maxInputTokens);

    // Added to that request, the document would take it past the limit.
    big = prose(maxInputTokens - previous!.promptTokens + 300);
    const [first] = await turn(d, 'c1', 'big question');
    const text = messagesOf(first!).map(textOf).join('\n');
    expect(text).toContain('[Retrieved for this message from manual.md');
    expect(text).not.toContain('message 0:');
    expect(first!.promptTokens).toBeLessThanOrEqual(maxInputTokens);
    const events = await d.store.readEvents('c1', undefined, 500);
    expect(events.filter((e) => e.type === 'context.compressed')).toHaveLength(1);
  });
});

describe('a Compressor given in code', () => {
  it('is the one the turn runs: a wrapper gets the default and the turn budget, and what it keeps is what the model sees', async () => {
    const budgets: number[] = [];
    const d = deps({
      stages: {
        compressor: (defaults) => ({
          compress(messages, budget) {
            budgets.push(budget);
            // No history at all: only the newest message, which is always kept.
            return defaults.compress(messages, 0);
          },
        }),
      },
    });
    await turn(d, 'c1', 'first');
    const [first] = await turn(d, 'c1', 'second');
    expect(messagesOf(first!).map((m) => m.role)).toEqual(['system', 'system', 'user']);
    expect(textOf(messagesOf(first!).at(-1))).toMatch(/\nsecond$/);
    expect(budgets.length).toBeGreaterThanOrEqual(2);
    for (const b of budgets) expect(b).toBeGreaterThan(0);
  });
});

describe('an Assembler given in code', () => {
  it('replaces the default: its system prompt and its view of the messages are what the model gets', async () => {
    const systemOf = (c: RuntimeContext) => `You are the replaced assembler.\nChatKey: ${c.chatKey}`;
    const replaced: Assembler = {
      systemTokens: (c) => countTextTokens(systemOf(c)),
      toModel: (messages) => convertToModelMessages(messages),
      async assemble({ context, messages }) {
        return {
          system: [{ role: 'system', content: systemOf(context) }],
          messages: await this.toModel(messages),
        };
      },
    };
    const d = deps({ stages: { assembler: replaced } });
    await turn(d, 'c1', 'hello');
    const [first] = await turn(d, 'c1', 'again');
    const messages = messagesOf(first!);
    expect(messages.filter((m) => m.role === 'system').map(textOf)).toEqual([
      'You are the replaced assembler.\nChatKey: c1',
    ]);
    // Its own view: no context block on the user's messages.
    expect(messages.filter((m) => m.role === 'user').map(textOf)).toEqual(['hello', 'again']);
  });
});

describe('instructions given in code', () => {
  function promptFile(text: string): string {
    const file = join(mkdtempSync(join(tmpdir(), 'chatlane-prompt-')), 'prompt.md');
    writeFileSync(file, text);
    return file;
  }

  it("as a string, go into the static part instead of SYSTEM_PROMPT_FILE's text", async () => {
    const env = { SYSTEM_PROMPT_FILE: promptFile('Answer as the file says.') };
    const [fromFile] = await turn(deps({}, env), 'c1', 'hello');
    expect(textOf(messagesOf(fromFile!)[0])).toContain('Answer as the file says.');

    const [fromCode] = await turn(deps({ instructions: 'You are the order desk.' }, env), 'c2', 'hello');
    const [staticPart, chatPart] = messagesOf(fromCode!);
    expect(textOf(staticPart)).toContain('## Instructions\nYou are the order desk.');
    expect(textOf(staticPart)).not.toContain('Answer as the file says.');
    expect(textOf(chatPart)).not.toContain('order desk');
  });

  it("as a function of the chat, are computed on every turn and go into the chat's part", async () => {
    const calls: unknown[] = [];
    const d = deps({
      instructions: async (chat) => {
        calls.push(chat);
        return `Answer ${chat.chatKey} in German.`;
      },
    });
    const meta = { channel: 'telegram', chatId: '42' };
    for (const id of ['m1', 'm2']) {
      await d.store.ingest('c1', userMessage('c1', id, `hello ${id}`, meta), {
        maxPending: 100,
        dedupWindowMs: 60_000,
      });
      expect(await runTurn(d, 'c1')).toMatchObject({ status: 'done' });
    }
    expect(calls).toEqual([
      { chatKey: 'c1', ...meta },
      { chatKey: 'c1', ...meta },
    ]);
    const [staticPart, chatPart] = messagesOf(mock.state.recorded('c1').at(-1)!);
    expect(textOf(chatPart)).toMatch(
      /^## Runtime context\n[^#]*\n\n## Instructions for this chat\nAnswer c1 in German\.$/,
    );
    expect(textOf(staticPart)).not.toContain('German');
  });

  it('as a function that throws, fail the attempt and leave the messages pending for the retry', async () => {
    const d = deps({
      instructions: () => {
        throw new Error('instructions store down');
      },
    });
    await ingestTexts(d.store, 'c1', 'hello');
    await expect(runTurn(d, 'c1')).rejects.toThrow('instructions store down');
    expect(await d.store.pendingCount('c1')).toBe(1);
    expect(mock.state.recorded('c1')).toHaveLength(0);
  });
});
