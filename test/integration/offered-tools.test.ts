import { fileURLToPath } from 'node:url';
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { ContactBook } from '../../src/shared/store/contacts.js';
import { createSkillsTool, loadSkills } from '../../src/worker/agent/skills.js';
import { compactChat } from '../../src/worker/compaction/compact.js';
import { SUMMARY_HEADER, SUMMARY_RULE } from '../../src/worker/pipeline/assembler.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { echoScript, type Script, scriptedModel, systemText } from '../helpers/scripted-model.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

const redis = testRedis();
let prefix: string;
const SKILLS_DIR = fileURLToPath(new URL('../fixtures/skills/', import.meta.url));
/** Guided tools a chat is offered only once it has what they act on. */
const GUIDED = ['chat_context_list', 'chat_context_load', 'chat_history_search'];
/** Offered to every turn, the first included: the tool list heads every request a prompt cache reuses. */
const ALWAYS = ['chat_context_clear_active', 'chat_context_new', 'chat_memory_update', 'chat_send'];

beforeEach(() => {
  prefix = randomPrefix('offer');
});
afterAll(async () => {
  await deleteLabel(redis, 'offer');
  redis.disconnect();
});

/** What each model call was offered: tool names (as the provider gets them) and the system prompt. */
interface Offer {
  tools: string[];
  system: string;
}

function recording(script: Script = echoScript) {
  const offers: Offer[] = [];
  const { model } = scriptedModel((prompt, call, options: LanguageModelV4CallOptions) => {
    offers.push({
      tools: (options.tools ?? []).map((t) => t.name).sort(),
      system: systemText(prompt),
    });
    return script(prompt, call, options);
  });
  return { model, offers };
}

/** One turn on `chatKey` answering `text`, with what its model calls were offered. */
async function turn(deps: TurnDeps, offers: Offer[], chatKey: string, text: string) {
  const from = offers.length;
  await ingestTexts(deps.store, chatKey, text);
  const outcome = await runTurn(deps, chatKey);
  return { outcome, offers: offers.slice(from) };
}

/** Compacts `chatKey` as the compactor would, keeping the last 2 messages; `summary` is the summary's text. */
async function compact(deps: TurnDeps, chatKey: string, summary: string): Promise<void> {
  const summarizer = scriptedModel(() => ({ text: summary })).model;
  const settings = {
    keepLast: 2,
    keepRecentTokens: 0,
    maxOutputTokens: 300,
    archive: true,
    maxEvents: 500,
    maxCharsPerMessage: 4000,
  };
  const res = await compactChat(
    { store: deps.store, model: summarizer, modelName: 'mock', logger: silentLogger(), settings },
    chatKey,
  );
  expect(res.status).toBe('applied');
}

async function toolOutputs(store: ChatStore, chatKey: string, type: string): Promise<unknown[]> {
  const history: ChatMessage[] = await store.readHistory(chatKey);
  return history
    .flatMap((m) => m.parts)
    .filter((p) => p.type === type)
    .map((p) => (p as { output?: unknown }).output);
}

describe('the tools a turn offers', () => {
  it("a fresh chat's first turn offers chat_send, chat_memory_update, chat_context_new and chat_context_clear_active (plus configured skills and contacts), and its prompt names no other tool", async () => {
    const { model, offers } = recording();
    const base = turnDeps(redis, prefix, model);
    const skills = loadSkills(SKILLS_DIR, silentLogger());
    const deps: TurnDeps = {
      ...base,
      skillsTool: createSkillsTool(skills),
      contacts: new ContactBook(base.store, { retentionMs: 60_000, dedupWindowMs: 60_000 }),
    };
    const first = await turn(deps, offers, 'c1', 'hello');
    expect(first.outcome).toMatchObject({ status: 'done', sent: 1 });
    for (const offer of first.offers) {
      expect(offer.tools).toEqual(['chat_contact_send', ...ALWAYS, 'skills_load']);
      for (const name of GUIDED) expect(offer.system).not.toContain(name);
    }
  });

  it('offers the same tools on the first and second turn, then list and load once the chat has an archived context', async () => {
    const { model, offers } = recording((prompt, call, options) => {
      const last = prompt.at(-1);
      const asked = last?.role === 'user' && JSON.stringify(last.content).includes('switch topic');
      if (asked) return { toolCalls: [{ name: 'chat_context_new', input: { title: 'greetings' } }] };
      return echoScript(prompt, call, options);
    });
    const deps = turnDeps(redis, prefix, model);
    const fresh = await turn(deps, offers, 'c1', 'hello');
    expect(fresh.offers[0]!.tools).toEqual(ALWAYS);

    const second = await turn(deps, offers, 'c1', 'switch topic');
    expect(second.outcome).toMatchObject({ status: 'done' });
    // Fixed for the whole turn: the call after the switch is offered what the first was.
    for (const offer of second.offers) {
      expect(offer.tools).toEqual([
        'chat_context_clear_active',
        'chat_context_new',
        'chat_memory_update',
        'chat_send',
      ]);
      expect(offer.system).toContain('`chat_context_new`');
      expect(offer.system).not.toContain('chat_context_list');
      expect(offer.system).not.toContain('chat_history_search');
    }
    expect(await toolOutputs(deps.store, 'c1', 'tool-chat_context_new')).toEqual([
      expect.objectContaining({ status: 'ok', archivedMessages: 2 }),
    ]);

    const third = await turn(deps, offers, 'c1', 'and now?');
    expect(third.offers[0]!.tools).toEqual([
      'chat_context_clear_active',
      'chat_context_list',
      'chat_context_load',
      'chat_context_new',
      'chat_memory_update',
      'chat_send',
    ]);
    expect(third.offers[0]!.system).toContain('`chat_context_load`');
  });

  it('offers chat_history_search once compaction archived something, and the per-process tool finds it', async () => {
    const { model, offers } = recording((prompt, call, options) => {
      const last = prompt.at(-1);
      if (last?.role === 'user' && JSON.stringify(last.content).includes('what was my passport')) {
        return { toolCalls: [{ name: 'chat_history_search', input: { query: 'passport' } }] };
      }
      return echoScript(prompt, call, options);
    });
    const deps = turnDeps(redis, prefix, model);
    await turn(deps, offers, 'c1', 'my passport number is XK-4471');
    for (const text of ['one', 'two', 'three', 'four', 'five']) {
      const t = await turn(deps, offers, 'c1', text);
      expect(t.offers[0]!.tools).not.toContain('chat_history_search');
    }
    await compact(deps, 'c1', 'summary without the number');

    const asked = await turn(deps, offers, 'c1', 'what was my passport number?');
    expect(asked.outcome).toMatchObject({ status: 'done' });
    expect(asked.offers[0]!.tools).toContain('chat_history_search');
    expect(asked.offers[0]!.system).toContain('`chat_history_search`');
    const [found] = (await toolOutputs(deps.store, 'c1', 'tool-chat_history_search')) as Array<{
      results: Array<{ text: string }>;
    }>;
    expect(found!.results[0]!.text).toContain('XK-4471');
  });

  it("explains the summary header in the prompt only once the chat's history starts with a summary", async () => {
    const { model, offers } = recording();
    const deps = turnDeps(redis, prefix, model);
    for (const text of ['one', 'two', 'three']) {
      const t = await turn(deps, offers, 'c1', text);
      for (const offer of t.offers) expect(offer.system).not.toContain(SUMMARY_HEADER);
    }
    await compact(deps, 'c1', 'they counted to three');
    const after = await turn(deps, offers, 'c1', 'four');
    expect(after.outcome).toMatchObject({ status: 'done' });
    for (const offer of after.offers) expect(offer.system.split('\n')).toContain(SUMMARY_RULE);
  });

  it('a call to a tool the turn does not offer fails as a tool error and changes nothing', async () => {
    const { model } = recording((prompt, call, options) => {
      if (call === 0) return { toolCalls: [{ name: 'chat_context_load', input: { id: 'ctx-1' } }] };
      if (call === 1) return { toolCalls: [{ name: 'chat_send', input: { text: 'hi there' } }] };
      return echoScript(prompt, call, options);
    });
    const deps = turnDeps(redis, prefix, model);
    await ingestTexts(deps.store, 'c1', 'hi');
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', sent: 1 });
    const history = await deps.store.readHistory('c1');
    const refused = history.flatMap((m) => m.parts).find((p) => p.type === 'dynamic-tool');
    expect(refused).toMatchObject({
      toolName: 'chat_context_load',
      state: 'output-error',
      errorText: expect.stringContaining('Available tools: chat_send, chat_memory_update, chat_context_new'),
    });
    const events = await deps.store.readEvents('c1', undefined, 100);
    expect(events.map((e) => e.type)).not.toContain('context.loaded');
  });
});
