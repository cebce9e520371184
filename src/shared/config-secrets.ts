/**
 * The secrets of the signed generic webhook sources: GENERIC_WEBHOOK_SECRETS_<NAME> for each
 * name in GENERIC_WEBHOOK_SOURCES, read from the environment map config.ts hands over.
 */

/** A generic webhook source: its name and its Standard Webhooks secrets, current first. */
export interface GenericSource {
  name: string;
  secrets: string[];
}

/** The variable holding a source's secrets: GENERIC_WEBHOOK_SECRETS_<NAME> ('-' becomes '_'). */
export function genericSecretsVariable(source: string): string {
  return `GENERIC_WEBHOOK_SECRETS_${source.toUpperCase().replace(/-/g, '_')}`;
}

const WHSEC = /^(?:whsec_)?([A-Za-z0-9+/]+={0,2})$/;

/**
 * Each source's secrets: whitespace- or comma-separated Standard Webhooks secrets
 * (`whsec_` + base64 of 24-64 bytes). Several at once for rotation: every one verifies
 * incoming webhooks and signs replies (one signature each); put the newest first.
 */
export function genericSources(
  names: string[],
  env: Record<string, string>,
): { sources: GenericSource[]; issues: string[] } {
  const sources: GenericSource[] = [];
  const issues: string[] = [];
  const seen = new Map<string, string>();
  for (const name of names) {
    const variable = genericSecretsVariable(name);
    const other = seen.get(variable);
    if (other) {
      issues.push(`  GENERIC_WEBHOOK_SOURCES: '${other}' and '${name}' both read ${variable}`);
      continue;
    }
    seen.set(variable, name);
    const secrets = (env[variable] ?? '').split(/[\s,]+/).filter(Boolean);
    if (secrets.length === 0) {
      issues.push(`  ${variable}: missing: source '${name}' needs at least one signing secret`);
      continue;
    }
    secrets.forEach((secret, i) => {
      const m = WHSEC.exec(secret);
      const bytes = m ? Buffer.from(m[1]!, 'base64').length : 0;
      if (bytes < 24 || bytes > 64) {
        issues.push(
          `  ${variable}: secret ${i + 1} is not whsec_ followed by the base64 of 24-64 random bytes`,
        );
      }
    });
    sources.push({ name, secrets });
  }
  return { sources, issues };
}
