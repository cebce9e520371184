import type { PlatformVariable } from './platform.js';

/**
 * Env checks the platform modules share (contract point 2 in ./platform.ts): a platform is on
 * as soon as one of its variables is set, and then every required one must be there, or the
 * process stops with one line per missing variable naming it.
 */
export function anySet(env: Readonly<Record<string, string>>, vars: readonly PlatformVariable[]): boolean {
  return vars.some((v) => env[v.name] !== undefined);
}

/** One problem line per required variable (`required: true`) that is unset, each naming it and what is set. */
export function missingVars(
  env: Readonly<Record<string, string>>,
  platform: string,
  variables: readonly PlatformVariable[],
): string[] {
  const present = variables.filter((v) => env[v.name] !== undefined).map((v) => v.name);
  return variables
    .filter((v) => v.required === true && env[v.name] === undefined)
    .map(
      (v) =>
        `${v.name}: missing: the ${platform} settings are half there (${present.join(', ')} set); set ${v.meaning}`,
    );
}

/** A problem line when `name` is set but is not an http(s) URL. */
export function urlProblem(env: Readonly<Record<string, string>>, name: string): string[] {
  const value = env[name];
  if (value === undefined) return [];
  return /^https?:\/\//.test(value) && URL.canParse(value) ? [] : [`${name}: is not an http(s) URL`];
}

/** `a,b , c` → ['a','b','c'] (unset: []). */
export function listVar(env: Readonly<Record<string, string>>, name: string): string[] {
  return (env[name] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}
