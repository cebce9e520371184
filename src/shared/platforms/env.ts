/**
 * Env checks the platform modules share (contract point 2 in ./platform.ts): a platform is on
 * as soon as one of its variables is set, and then every required one must be there, or the
 * process stops with one line per missing variable naming it.
 */
export function anySet(env: Readonly<Record<string, string>>, vars: readonly string[]): boolean {
  return vars.some((v) => env[v] !== undefined);
}

/** One problem line per required variable that is unset, each naming it and what is set. */
export function missingVars(
  env: Readonly<Record<string, string>>,
  platform: string,
  required: readonly { name: string; what: string }[],
  all: readonly string[],
): string[] {
  const present = all.filter((v) => env[v] !== undefined);
  return required
    .filter((r) => env[r.name] === undefined)
    .map(
      (r) =>
        `${r.name}: missing: the ${platform} settings are half there (${present.join(', ')} set); set ${r.what}`,
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
