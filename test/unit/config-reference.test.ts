import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  configSchema,
  loadConfig,
  loadMockLlmConfig,
  mockLlmConfigSchema,
} from '../../src/shared/config.js';
import {
  AREAS,
  configReference,
  configurationMarkdown,
  groupByArea,
  ROLES,
  START_HERE,
  VARIABLE_ROLES,
  variablesOf,
} from '../../src/shared/config-reference.js';
import { roleHelp } from '../../src/shared/config-text.js';

/**
 * docs/configuration.md is what the config schema generates, every variable has a one-line
 * meaning and its roles, and what the reference says about defaults and bounds is what
 * loadConfig does.
 */

const reference = configReference();
const byName = new Map(reference.map((d) => [d.name, d]));
// The schemas loadConfig and loadMockLlmConfig parse, built once for the many parses below
// (loadConfig builds its schema on every call); one loadConfig test shows they are the same.
const main = configSchema();
const mock = mockLlmConfigSchema();
const accepts = (env: Record<string, string>) =>
  (Object.keys(env).some((k) => k.startsWith('MOCK_LLM_')) ? mock : main).safeParse(env, { jitless: true })
    .success;

describe('the configuration reference', () => {
  it('docs/configuration.md is exactly what the schema generates (npm run docs:config)', () => {
    const page = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    expect(page, 'docs/configuration.md is out of date: run `npm run docs:config`').toBe(
      configurationMarkdown(),
    );
  });

  it('every variable has a one-line meaning (.describe on its schema)', () => {
    const missing = reference.filter((d) => !d.description?.trim()).map((d) => d.name);
    expect(missing, 'add .describe("…") to these in src/shared/config.ts').toEqual([]);
    for (const d of reference) expect(d.description, d.name).not.toContain('\n');
  });

  it('every variable names the roles that read it, and the role map names no variable the schema lacks', () => {
    const roleless = reference.filter((d) => d.roles.length === 0).map((d) => d.name);
    expect(roleless, 'add these to VARIABLE_ROLES in src/shared/config-reference.ts').toEqual([]);
    expect(Object.keys(VARIABLE_ROLES).filter((name) => !byName.has(name))).toEqual([]);
    for (const roles of Object.values(VARIABLE_ROLES)) for (const r of roles) expect(ROLES).toContain(r);
  });

  it('every integer default is what loadConfig gives for an empty environment', () => {
    const config = { ...loadConfig({}), ...loadMockLlmConfig({}) } as Record<string, unknown>;
    const integers = reference.filter((d) => d.type === 'integer' && d.default !== undefined);
    expect(integers.length).toBeGreaterThan(50);
    for (const d of integers) expect(config[d.name], d.name).toBe(Number(d.default));
  });

  it('every lower bound it states is the one the schema enforces', () => {
    const bounded = reference.filter((d) => d.type === 'integer' && /^(≥ |\d)/.test(d.range ?? ''));
    expect(bounded.length).toBeGreaterThan(50);
    for (const d of bounded) {
      const min = Number(/^(?:≥ )?(\d+)/.exec(d.range!)![1]);
      expect(accepts({ [d.name]: String(min) }), `${d.name}=${min}`).toBe(true);
      if (min > 0) expect(accepts({ [d.name]: String(min - 1) }), `${d.name}=${min - 1}`).toBe(false);
    }
  });

  it('loadConfig refuses a value below a stated bound, naming the variable', () => {
    expect(byName.get('WORKER_CONCURRENCY')?.range).toBe('≥ 1');
    expect(() => loadConfig({ WORKER_CONCURRENCY: '0' })).toThrow(/WORKER_CONCURRENCY/);
    expect(() => loadConfig({ WORKER_CONCURRENCY: '0' })).toThrow(ConfigError);
  });

  it('a flag takes true, false, 1 and 0 and nothing else', () => {
    const flags = reference.filter((x) => x.type === 'flag');
    expect(flags.length).toBeGreaterThan(3);
    for (const d of flags) {
      for (const v of ['true', 'false', '1', '0']) expect(accepts({ [d.name]: v }), d.name).toBe(true);
      expect(accepts({ [d.name]: 'yes' }), d.name).toBe(false);
    }
  });

  it("a role's variables are those whose roles include it; all is the ingress's, worker's and compactor's", () => {
    expect(variablesOf('compactor', reference).map((d) => d.name)).toContain('COMPACTION_MODEL');
    expect(variablesOf('compactor', reference).map((d) => d.name)).not.toContain('PORT');
    const all = new Set(variablesOf('all', reference).map((d) => d.name));
    for (const role of ['ingress', 'worker', 'compactor'] as const)
      for (const d of variablesOf(role, reference)) expect(all.has(d.name), d.name).toBe(true);
    expect(all.has('MOCK_LLM_PORT')).toBe(false);
  });

  it('every variable is in exactly one area, and the areas and Start here name no variable the schema lacks', () => {
    const listed = AREAS.flatMap((a) => a.variables);
    const unplaced = reference.filter((d) => !listed.includes(d.name)).map((d) => d.name);
    expect(unplaced, 'add these to AREAS in src/shared/config-areas.ts').toEqual([]);
    const twice = listed.filter((name, i) => listed.indexOf(name) !== i);
    expect(twice, 'each variable belongs to one area only').toEqual([]);
    expect([...listed, ...START_HERE.variables].filter((name) => !byName.has(name))).toEqual([]);
  });

  it('the grouped reference lists every variable once, Start here first and no Other group', () => {
    const groups = groupByArea(reference);
    expect(groups[0]?.title).toBe(START_HERE.title);
    expect(groups.map((g) => g.title)).not.toContain('Other');
    const names = groups.flatMap((g) => g.docs.map((d) => d.name));
    expect(names.toSorted()).toEqual(reference.map((d) => d.name).toSorted());
  });

  it("a role's help starts with the model, Redis, the port and access it needs, then the rest by area", () => {
    const firstGroup = (role: Parameters<typeof roleHelp>[0]) => {
      const text = roleHelp(role);
      const start = text.indexOf(`== ${START_HERE.title} ==`);
      const end = text.indexOf('\n== ', start + 1);
      expect(start, role).toBeGreaterThan(0);
      return [...text.slice(start, end).matchAll(/^([A-Z][A-Z0-9_]+) {2}\(/gm)].map((m) => m[1]);
    };
    expect(firstGroup('worker')).toEqual([
      'LLM_MODEL',
      'OPENAI_API_KEY',
      'ANTHROPIC_API_KEY',
      'GOOGLE_GENERATIVE_AI_API_KEY',
      'REDIS_URL',
      'METRICS_PORT',
      'HOST',
      'METRICS_TOKEN',
    ]);
    expect(firstGroup('ingress')).toEqual([
      'REDIS_URL',
      'PORT',
      'HOST',
      'API_TOKEN',
      'API_AUTH',
      'WEB_TOKEN_SECRET',
      'METRICS_TOKEN',
    ]);
    const worker = roleHelp('worker');
    for (const area of ['Redis', 'Model', 'Turns and limits', 'Compaction', 'Tools and sandbox'])
      expect(worker).toContain(`\n== ${area} ==\n`);
    expect(worker.indexOf('== Model ==')).toBeLessThan(worker.indexOf('== Turns and limits =='));
  });
});
