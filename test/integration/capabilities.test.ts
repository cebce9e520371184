import { fileURLToPath } from 'node:url';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { applyCompaction, readSnapshot } from '../../src/shared/store/archive.js';
import { readMemory, writeMemory } from '../../src/shared/store/memory.js';
import { createSkillsTool, loadSkills } from '../../src/worker/agent/skills.js';
import { DefaultAssembler } from '../../src/worker/pipeline/assembler.js';
import { BUDGET_LINE } from '../../src/worker/pipeline/sections.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { assistantMessage, counted, userMessage } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { echoScript, type Script, scriptedModel, systemText } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';

const SKILLS_DIR = fileURLToPath(new URL('../fixtures/skills/', import.meta.url));
const redis = testRedis();
let prefix: string;
const limits = { maxPending: 100, dedupWindowMs: 60_000 };

beforeEach(() => {
  prefix = randomPrefix('caps');
});
afterAll(async () => {
  await deleteLabel(redis, 'caps');
  redis.disconnect();
});

/** Turn deps with a profile, the fixture skills and a memory cap. */
function deps(script: Script, settings: Parameters<typeof turnDeps>[3] = {}) {
  const { model, prompts } = scriptedModel(script);
  const skills = loadSkills(SKILLS_DIR, silentLogger());
  const base = turnDeps(redis, prefix, model, { memoryMaxTokens: 50, ...settings });
  return {
    prompts,
    deps: {
      ...base,
      assembler: new DefaultAssembler({
        maxSendsPerTurn: 5,
        profile: 'PROFILE: I am Ada, the shop assistant of Example Ltd.',
        skills,
      }),
      skillsTool: createSkillsTool(skills),
    },
  };
}

const systemOf = systemText;

async function toolParts(store: ReturnType<typeof turnDeps>['store'], chatKey: string) {
  const history: ChatMessage[] = await store.readHistory(chatKey);
  return history.flatMap((m) => m.parts) as Array<{
    type: string;
    state?: string;
    output?: unknown;
    errorText?: string;
  }>;
}

describe('profile, skills and memory in a turn', () => {
  it('the system prompt the model received has profile, then skills, then runtime context, then memory', async () => {
    const { deps: d, prompts } = deps(echoScript);
    await d.store.ingest('c1', userMessage('c1', 'm1', 'hi'), limits);
    await writeMemory(d.store, 'c1', {
      content: 'MEMORY: prefers tea',
      fence: undefined,
      runId: 'op',
      maxTokens: 50,
    });
    expect(await runTurn(d, 'c1')).toMatchObject({ status: 'done' });
    const system = systemOf(prompts[0]!);
    const at = (s: string) => system.indexOf(s);
    expect(at('PROFILE: I am Ada')).toBeGreaterThan(-1);
    expect(at('## Skills')).toBeGreaterThan(at('PROFILE: I am Ada'));
    expect(at('ChatKey: c1')).toBeGreaterThan(at('## Skills'));
    expect(at('MEMORY: prefers tea')).toBeGreaterThan(at('ChatKey: c1'));
    // Every valid skill is listed; the folder without front matter is not.
    expect(system).toContain('- refunds: Handle refund requests politely and ask for the order number.');
    expect(system).toContain(
      '- weather: Answer questions about the weather: always give the temperature in Celsius.',
    );
    expect(system).not.toContain('without front matter');
    expect(system).not.toContain(BUDGET_LINE);
  });

  it('a chat without memory has no memory section', async () => {
    const { deps: d, prompts } = deps(echoScript);
    await d.store.ingest('c1', userMessage('c1', 'm1', 'hi'), limits);
    await runTurn(d, 'c1');
    expect(systemOf(prompts[0]!)).not.toContain('## Memory of this chat');
  });

  it('skills_load returns the SKILL.md body as a tool result; an unknown name is a tool error listing the known ones', async () => {
    const { deps: d, prompts } = deps((_p, call) => {
      if (call === 0)
        return {
          toolCalls: [
            { name: 'skills_load', input: { name: 'weather' } },
            { name: 'skills_load', input: { name: 'cooking' } },
          ],
        };
      return { text: '' };
    });
    await d.store.ingest('c1', userMessage('c1', 'm1', 'weather in Oslo?'), limits);
    expect(await runTurn(d, 'c1')).toMatchObject({ status: 'done' });
    const parts = (await toolParts(d.store, 'c1')).filter((p) => p.type === 'tool-skills_load');
    expect(parts[0]).toMatchObject({ state: 'output-available' });
    expect(JSON.stringify(parts[0]!.output)).toContain(
      'Give the temperature in Celsius, then one short sentence.',
    );
    expect(parts[1]).toMatchObject({ state: 'output-error' });
    expect(parts[1]!.errorText).toBe('unknown skill "cooking"; known skills: refunds, weather');
    // The model read the body in its next step.
    expect(JSON.stringify(prompts[1]!.at(-1))).toContain('Ask for the city');
  });

  it('chat_memory_update replaces the memory; the next turn shows it; over the cap it is a tool error', async () => {
    const { deps: d, prompts } = deps((_p, call) => {
      if (call === 0)
        return { toolCalls: [{ name: 'chat_memory_update', input: { content: 'likes green tea' } }] };
      if (call === 2)
        return { toolCalls: [{ name: 'chat_memory_update', input: { content: 'word '.repeat(200) } }] };
      return { text: '' };
    });
    await d.store.ingest('c1', userMessage('c1', 'm1', 'remember: green tea'), limits);
    await runTurn(d, 'c1');
    expect(await readMemory(d.store, 'c1')).toBe('likes green tea');

    await d.store.ingest('c1', userMessage('c1', 'm2', 'now a novel'), limits);
    await runTurn(d, 'c1');
    expect(systemOf(prompts[2]!)).toContain('likes green tea');
    const refused = (await toolParts(d.store, 'c1'))
      .filter((p) => p.type === 'tool-chat_memory_update')
      .at(-1);
    expect(refused).toMatchObject({ state: 'output-error' });
    expect(refused!.errorText).toMatch(/limit is 50/);
    expect(await readMemory(d.store, 'c1')).toBe('likes green tea');
  });

  it('a stale turn’s chat_memory_update is fenced out and writes nothing', async () => {
    const { deps: d } = deps(
      async (_p, call) => {
        if (call === 0) {
          // Stall past the lease (no renewal can run); another worker takes the chat.
          const until = Date.now() + 400;
          while (Date.now() < until) {
            /* stall */
          }
          expect((await d.store.acquire('c1', 'other-worker', 10_000)).ok).toBe(true);
          return { toolCalls: [{ name: 'chat_memory_update', input: { content: 'stale note' } }] };
        }
        return { text: '' };
      },
      { leaseMs: 200 },
    );
    await d.store.ingest('c1', userMessage('c1', 'm1', 'hi'), limits);
    expect((await runTurn(d, 'c1')).status).toBe('lost');
    expect(await readMemory(d.store, 'c1')).toBe('');
    const events = await d.store.readEvents('c1', undefined, 50);
    const rejected = events
      .filter((e) => e.type === 'fence.rejected')
      .map((e) => (e.data as { op: string }).op);
    expect(rejected).toContain('memory');
  });

  it('memory survives a context switch and a compaction (it is not history)', async () => {
    const { deps: d, prompts } = deps((_p, call) => {
      if (call === 0) return { toolCalls: [{ name: 'chat_context_new', input: { title: 'old' } }] };
      if (call === 1) return { toolCalls: [{ name: 'chat_send', input: { text: 'fresh start' } }] };
      return { text: '' };
    });
    await d.store.ingest('c1', userMessage('c1', 'm1', 'first'), limits);
    await writeMemory(d.store, 'c1', { content: 'name is Bo', fence: undefined, runId: 'op', maxTokens: 50 });
    await runTurn(d, 'c1');
    expect(await readMemory(d.store, 'c1')).toBe('name is Bo');
    await d.store.ingest('c1', userMessage('c1', 'm2', 'second'), limits);
    await runTurn(d, 'c1');
    expect(systemOf(prompts.at(-1)!)).toContain('name is Bo');

    const snap = await readSnapshot(d.store, 'c1');
    const range = { fromId: snap.history[0]!.id, toId: snap.history.at(-1)!.id, count: snap.history.length };
    const compacted = await applyCompaction(d.store, 'c1', {
      expectedVersion: snap.version,
      replaced: snap.history,
      summary: counted(assistantMessage('c1', 's-1', 'summary', { kind: 'summary', sourceRange: range })),
      archive: undefined,
      maxEvents: 100,
      eventData: {},
    });
    expect(compacted.status).toBe('ok');
    expect(await readMemory(d.store, 'c1')).toBe('name is Bo');
  });

  it('the budget guard line appears when the assembled input is above 90 % of MAX_INPUT_TOKENS, never otherwise', async () => {
    const long = 'lorem ipsum dolor sit amet '.repeat(120);
    const run = async (chatKey: string, maxInputTokens: number) => {
      const { deps: d, prompts } = deps(echoScript, { maxInputTokens });
      await d.store.ingest(chatKey, userMessage(chatKey, 'm1', long), limits);
      await runTurn(d, chatKey);
      return systemOf(prompts[0]!);
    };
    // Hundreds of tokens of message plus the system prompt and reserve: over 90 % of 1,000, far under 12,000.
    expect(await run('full', 1000)).toContain(BUDGET_LINE);
    expect(await run('roomy', 12_000)).not.toContain('nearly full');
  });
});
