import {
  groupByArea,
  ROLE_SUMMARY,
  type Role,
  readableDefault,
  type VariableDoc,
  variablesOf,
} from './config-reference.js';

/** The configuration reference for a terminal: `chatlane config` and `chatlane <role> --help`. */

/** The reference as plain text for a terminal: a heading per group, one entry per variable, its meaning indented under it. */
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

/** `chatlane <role> --help`. */
export function roleHelp(role: Role | 'all'): string {
  const platforms = ['ingress', 'worker', 'delivery', 'all'].includes(role)
    ? '\nPlus the variables of every chat platform it is given (docs/platforms.md).\n'
    : '';
  return `chatlane ${role}: ${ROLE_SUMMARY[role]}

usage: chatlane ${role} [-h | --help]

Runs until SIGTERM or SIGINT. Takes no arguments: it reads its configuration from the
environment, the variables below, grouped by area (all of them: chatlane config, or
docs/configuration.md).

${configurationText(variablesOf(role))}
${platforms}`;
}
