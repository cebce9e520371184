import {
  PLATFORM_ROLES,
  PLATFORMS_GROUP,
  type PlatformVariableDoc,
  platformReference,
} from './config-platforms.js';
import {
  configReference,
  groupByArea,
  ROLE_SUMMARY,
  type Role,
  readableDefault,
  type VariableDoc,
  variablesOf,
} from './config-reference.js';

/**
 * The configuration reference for a terminal (`chatlane config`, `chatlane <role> --help`): a
 * heading per group, one entry per variable, its meaning indented under it.
 */
export function configurationText(docs: VariableDoc[]): string {
  const entry = (d: VariableDoc) => {
    const facts = [
      d.type,
      d.range,
      `default ${readableDefault(d.name, d.default)}`,
      `roles: ${d.roles.join(', ') || 'none'}`,
    ].filter(Boolean);
    return `${d.name}  (${facts.join('; ')})\n    ${d.description ?? '(no description)'}`;
  };
  return groupByArea(docs)
    .map((g) => `== ${g.title} ==\n${g.docs.map(entry).join('\n')}`)
    .join('\n\n');
}

/** The platforms' group for a terminal: a heading, what turns one on, then an entry per variable. */
export function platformsText(vars: PlatformVariableDoc[]): string {
  const entry = (v: PlatformVariableDoc) => {
    const facts = [
      v.platform,
      v.required === true ? 'required' : v.required && `required: ${v.required}`,
      `default ${v.default ?? '—'}`,
    ].filter(Boolean);
    return `${v.name}  (${facts.join('; ')})\n    ${v.meaning}`;
  };
  return `== ${PLATFORMS_GROUP.title} ==\n${PLATFORMS_GROUP.intro}\n${vars.map(entry).join('\n')}`;
}

/** What `chatlane config [--role R]` lists: every variable, or R's; with the platforms' when R reads them. */
export function referenceOf(role?: Role | 'all'): { docs: VariableDoc[]; platforms: PlatformVariableDoc[] } {
  return {
    docs: role === undefined ? configReference() : variablesOf(role),
    platforms: role === undefined || PLATFORM_ROLES.includes(role) ? platformReference() : [],
  };
}

/** `chatlane config [--role R]` for a terminal. */
export function referenceText(role?: Role | 'all'): string {
  const { docs, platforms } = referenceOf(role);
  return [configurationText(docs), ...(platforms.length > 0 ? [platformsText(platforms)] : [])].join('\n\n');
}

/** `chatlane <role> --help`. */
export function roleHelp(role: Role | 'all'): string {
  return `chatlane ${role}: ${ROLE_SUMMARY[role]}

usage: chatlane ${role} [-h | --help]

Runs until SIGTERM or SIGINT. Takes no arguments: it reads its configuration from the
environment, the variables below, grouped by area (all of them: chatlane config, or
docs/configuration.md).

${referenceText(role)}
`;
}
