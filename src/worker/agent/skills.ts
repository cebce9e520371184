import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tool } from 'ai';
import { z } from 'zod';
import { ConfigError } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { toolInput } from './tools/input.js';

/** One skill of SKILLS_DIR (the Agent Skills layout: `<folder>/SKILL.md` with front matter). */
export interface Skill {
  name: string;
  description: string;
  /** SKILL.md without its front matter: what `skills_load` returns. */
  body: string;
}

const FRONT_MATTER = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/;

/** `key: value` lines of a YAML front matter (quoted or plain scalars; enough for name/description). */
function frontMatterFields(yaml: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of yaml.split(/\r?\n/)) {
    const m = /^([A-Za-z_][\w-]*):\s*(.*)$/.exec(line);
    if (!m) continue;
    let value = m[2]!.trim();
    if (/^(['"]).*\1$/.test(value)) value = value.slice(1, -1);
    fields[m[1]!] = value;
  }
  return fields;
}

/** A SKILL.md's name, description and body; undefined when its front matter lacks them. */
export function parseSkill(text: string): Skill | undefined {
  const m = FRONT_MATTER.exec(text.replace(/^\uFEFF/, ''));
  if (!m) return undefined;
  const fields = frontMatterFields(m[1]!);
  if (!fields.name || !fields.description) return undefined;
  return { name: fields.name, description: fields.description, body: m[2]!.trim() };
}

/**
 * Every skill under `dir`, read once at start, sorted by name. A folder whose SKILL.md has no
 * usable front matter is skipped with a warning; a missing directory is a ConfigError.
 */
export function loadSkills(dir: string | undefined, logger: Logger): Skill[] {
  if (!dir) return [];
  let folders: string[];
  try {
    folders = readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch (err) {
    throw new ConfigError(`SKILLS_DIR: cannot read ${dir}: ${(err as Error).message}`);
  }
  const skills = new Map<string, Skill>();
  for (const folder of folders.sort()) {
    const file = join(dir, folder, 'SKILL.md');
    if (!existsSync(file)) continue;
    const skill = parseSkill(readFileSync(file, 'utf8'));
    if (!skill) {
      logger.warn({ file }, 'skill skipped: SKILL.md needs front matter with name and description');
      continue;
    }
    if (skills.has(skill.name)) {
      logger.warn({ file, name: skill.name }, 'skill skipped: another skill has the same name');
      continue;
    }
    skills.set(skill.name, skill);
  }
  return [...skills.values()];
}

const INPUT = toolInput(z.object({ name: z.string().max(200) }));

/** `skills_load`: built once at start; the body comes back as the tool result the model reads next. */
export function createSkillsTool(skills: Skill[]) {
  const byName = new Map(skills.map((s) => [s.name, s]));
  const known = skills.map((s) => s.name).join(', ');
  return tool({
    description: 'Load the full instructions of one skill listed under "Skills" in your instructions.',
    inputSchema: INPUT,
    execute: async ({ name }) => {
      const skill = byName.get(name);
      if (!skill) throw new Error(`unknown skill "${name}"; known skills: ${known || 'none'}`);
      return { name: skill.name, instructions: skill.body };
    },
  });
}
