import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../../shared/config.js';

/** The profile files of PROFILE_DIR, in the order they go into the system prompt. */
export const PROFILE_FILES = ['Primary.md', 'other.md'] as const;

/**
 * PROFILE_DIR's Primary.md and other.md (each if present), read once at start. A directory
 * that cannot be read stops the process; a directory with neither file gives no profile.
 */
export function loadProfile(dir: string | undefined): string | undefined {
  if (!dir) return undefined;
  try {
    if (!statSync(dir).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    throw new ConfigError(`PROFILE_DIR: cannot read ${dir}: ${(err as Error).message}`);
  }
  const parts: string[] = [];
  for (const name of PROFILE_FILES) {
    try {
      const text = readFileSync(join(dir, name), 'utf8').trim();
      if (text) parts.push(text);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new ConfigError(`PROFILE_DIR: cannot read ${join(dir, name)}: ${(err as Error).message}`);
      }
    }
  }
  return parts.length > 0 ? parts.join('\n\n') : undefined;
}
