import { describe, expect, it } from 'vitest';
import { platformReference } from '../../src/shared/config-platforms.js';
import { PLATFORMS } from '../../src/shared/platforms/registry.js';

/**
 * Each platform module lists every variable it reads (`variables`), and the configuration
 * reference (`chatlane config`, docs/configuration.md) prints that list: so a variable a module
 * reads but does not list, or lists but never reads, fails here.
 */

/** The variable names `fromEnv` looks at when given `values`. */
function readsOf(
  fromEnv: (env: Readonly<Record<string, string>>) => unknown,
  values: Record<string, string>,
) {
  const reads = new Set<string>();
  const env = new Proxy(values, {
    get(target, key) {
      if (typeof key === 'string') reads.add(key);
      return target[key as string];
    },
    has(target, key) {
      if (typeof key === 'string') reads.add(key);
      return key in target;
    },
  });
  fromEnv(env);
  return reads;
}

describe.each(PLATFORMS.map((m) => [m.name, m] as const))('the %s platform module', (_name, module) => {
  const names = module.variables.map((v) => v.name);

  it('reads no variable it does not list, whichever of them are set', () => {
    const settings = [
      {},
      Object.fromEntries(names.map((n) => [n, 'x'])),
      ...names.map((n) => ({ [n]: 'x' })),
    ];
    for (const values of settings) {
      const unlisted = [...readsOf(module.fromEnv, values)].filter((k) => !names.includes(k));
      expect(unlisted, `read by ${module.name}.fromEnv but not in its variables`).toEqual([]);
    }
  });

  it('is turned on by any one of its variables, and a required one missing is a problem naming it', () => {
    for (const name of names) expect(module.fromEnv({ [name]: 'x' }).enabled, name).toBe(true);
    for (const v of module.variables.filter((x) => x.required === true)) {
      const others = Object.fromEntries(names.filter((n) => n !== v.name).map((n) => [n, 'x']));
      const result = module.fromEnv(others);
      expect(
        'problems' in result && result.problems.some((p) => p.startsWith(`${v.name}: missing`)),
        v.name,
      ).toBe(true);
    }
  });

  it('gives every variable a one-line meaning', () => {
    for (const v of module.variables) expect(v.meaning.trim(), v.name).not.toBe('');
    for (const v of module.variables) expect(v.meaning, v.name).not.toContain('\n');
  });
});

describe('the platforms in the configuration reference', () => {
  it('lists every variable of every platform module once', () => {
    const listed = platformReference().map((v) => v.name);
    expect(listed).toEqual(PLATFORMS.flatMap((m) => m.variables.map((v) => v.name)));
    expect(new Set(listed).size).toBe(listed.length);
    expect(listed).toContain('TELEGRAM_BOT_TOKEN');
  });
});
