import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, loadMockLlmConfig } from '../../src/shared/config.js';
import {
  configReference,
  configurationMarkdown,
  ROLES,
  VARIABLE_ROLES,
  variablesOf,
} from '../../src/shared/config-reference.js';

/**
 * docs/configuration.md is what the config schema generates, every variable has a one-line
 * meaning and its roles, and what the reference says about defaults and bounds is what
 * loadConfig does.
 */

const reference = configReference();
const byName = new Map(reference.map((d) => [d.name, d]));
const load = (env: Record<string, string>) =>
  Object.keys(env).some((k) => k.startsWith('MOCK_LLM_')) ? loadMockLlmConfig(env) : loadConfig(env);

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

  it('every lower bound it states is the one loadConfig enforces', () => {
    const bounded = reference.filter((d) => d.type === 'integer' && /^(≥ |\d)/.test(d.range ?? ''));
    expect(bounded.length).toBeGreaterThan(50);
    for (const d of bounded) {
      const min = Number(/^(?:≥ )?(\d+)/.exec(d.range!)![1]);
      // The headers timeout may not exceed the request timeout: move the other one along.
      const room: Record<string, string> =
        d.name === 'HTTP_HEADERS_TIMEOUT_MS'
          ? { HTTP_REQUEST_TIMEOUT_MS: String(min + 1) }
          : d.name === 'HTTP_REQUEST_TIMEOUT_MS'
            ? { HTTP_HEADERS_TIMEOUT_MS: String(min) }
            : {};
      expect(() => load({ ...room, [d.name]: String(min) }), `${d.name}=${min}`).not.toThrow();
      if (min > 0)
        expect(() => load({ [d.name]: String(min - 1) }), `${d.name}=${min - 1}`).toThrow(ConfigError);
    }
  });

  it('a flag takes true, false, 1 and 0 and nothing else', () => {
    for (const d of reference.filter((x) => x.type === 'flag')) {
      for (const v of ['true', 'false', '1', '0']) expect(() => load({ [d.name]: v }), d.name).not.toThrow();
      expect(() => load({ [d.name]: 'yes' }), d.name).toThrow(ConfigError);
    }
  });

  it("a role's variables are those whose roles include it; all is the ingress's, worker's and compactor's", () => {
    expect(variablesOf('compactor').map((d) => d.name)).toContain('COMPACTION_MODEL');
    expect(variablesOf('compactor').map((d) => d.name)).not.toContain('PORT');
    const all = new Set(variablesOf('all').map((d) => d.name));
    for (const role of ['ingress', 'worker', 'compactor'] as const)
      for (const d of variablesOf(role)) expect(all.has(d.name), d.name).toBe(true);
    expect(all.has('MOCK_LLM_PORT')).toBe(false);
  });
});
