import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadSkills, parseSkill } from '../../src/worker/agent/skills.js';
import { DefaultAssembler } from '../../src/worker/pipeline/assembler.js';
import { BUDGET_LINE, isNearlyFull, skillsSection } from '../../src/worker/pipeline/sections.js';

const SKILLS_DIR = fileURLToPath(new URL('../fixtures/skills/', import.meta.url));
const context = { chatKey: 'c1', now: new Date(0) };

describe('budget guard', () => {
  it('is on only above 90 % of MAX_INPUT_TOKENS', () => {
    expect(isNearlyFull(901, 1000)).toBe(true);
    expect(isNearlyFull(900, 1000)).toBe(false);
    expect(isNearlyFull(10, 1000)).toBe(false);
  });

  it('adds exactly one line to the system prompt when nearly full, none otherwise', () => {
    const assembler = new DefaultAssembler({ maxSendsPerTurn: 5 });
    const full = assembler.systemPrompt(context, true);
    expect(full.split(BUDGET_LINE)).toHaveLength(2);
    expect(full.endsWith(BUDGET_LINE)).toBe(true);
    expect(assembler.systemPrompt(context, false)).not.toContain('nearly full');
    expect(assembler.systemPrompt(context)).not.toContain('nearly full');
  });
});

describe('skills', () => {
  it('lists every skill with front matter and skips a SKILL.md without it, with a warning', () => {
    const warnings: unknown[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line)) });
    const skills = loadSkills(SKILLS_DIR, logger);
    expect(skills.map((s) => s.name)).toEqual(['refunds', 'weather']);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ file: expect.stringContaining('broken/SKILL.md') });
    expect(skillsSection(skills)).toBe(
      [
        '## Skills',
        'Before doing a task one of these skills covers, load its instructions with `skills_load` and follow them.',
        '- refunds: Handle refund requests politely and ask for the order number.',
        '- weather: Answer questions about the weather: always give the temperature in Celsius.',
      ].join('\n'),
    );
  });

  it('needs both name and description in the front matter', () => {
    expect(parseSkill('---\nname: x\n---\nbody')).toBeUndefined();
    expect(parseSkill('no front matter')).toBeUndefined();
    expect(parseSkill("---\nname: 'x'\ndescription: does x\n---\nbody\n")).toEqual({
      name: 'x',
      description: 'does x',
      body: 'body',
    });
  });

  it('counts the static sections once: the skills and profile are in the system tokens', () => {
    const bare = new DefaultAssembler({ maxSendsPerTurn: 5 });
    const rich = new DefaultAssembler({
      maxSendsPerTurn: 5,
      profile: 'I am Ada.',
      skills: loadSkills(SKILLS_DIR, pino({ level: 'silent' })),
    });
    expect(rich.systemTokens(context)).toBeGreaterThan(bare.systemTokens(context) + 30);
    expect(rich.systemTokens({ ...context, memory: 'likes tea' })).toBeGreaterThan(
      rich.systemTokens(context),
    );
  });
});
