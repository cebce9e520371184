import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The source tree's floors (docs/development.md, "Where the code lives"): a file imports only
 * from its own part or from a lower floor, never up and never sideways into another part of
 * its floor. So the process plumbing sits below every role, the roles below the one function
 * that composes them, and the CLI and the public entry on top.
 */
const PARTS: ReadonlyArray<{ part: string; floor: number }> = [
  { part: 'src/shared/process/', floor: 1 },
  { part: 'src/shared/', floor: 0 },
  { part: 'src/mock-llm/', floor: 1 },
  { part: 'src/fake-telegram/', floor: 1 },
  { part: 'src/loadtest/', floor: 1 },
  { part: 'src/worker/pipeline/', floor: 2 },
  { part: 'src/worker/shell/', floor: 2 },
  { part: 'src/worker/agent/', floor: 3 },
  { part: 'src/worker/mcp/', floor: 3 },
  { part: 'src/worker/turn/', floor: 4 },
  { part: 'src/worker/compaction/', floor: 4 },
  { part: 'src/worker/delivery/', floor: 4 },
  { part: 'src/worker/upkeep/', floor: 4 },
  { part: 'src/ingress/', floor: 4 },
  { part: 'src/roles/', floor: 5 },
  { part: 'src/start/', floor: 6 },
  { part: 'src/demo/', floor: 7 },
  { part: 'src/index.ts', floor: 8 },
  { part: 'src/cli.ts', floor: 8 },
];

const root = resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

function partOf(file: string): { part: string; floor: number } {
  const rel = relative(root, file);
  const found = PARTS.find((p) => rel === p.part || rel.startsWith(p.part));
  if (!found) throw new Error(`${rel} is in no part of the layer table: add its directory to PARTS`);
  return found;
}

/** Relative imports, static and dynamic, as repository paths of the .ts files they name. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
  return specs.map((spec) => resolve(dirname(file), spec).replace(/\.js$/, '.ts'));
}

function violations(): string[] {
  const found: string[] = [];
  for (const file of sources(join(root, 'src'))) {
    const from = partOf(file);
    for (const target of importsOf(file)) {
      const to = partOf(target);
      const rel = `${relative(root, file)} → ${relative(root, target)}`;
      if (to.floor > from.floor) found.push(`${rel}: up from floor ${from.floor} to ${to.floor}`);
      else if (to.floor === from.floor && to.part !== from.part)
        found.push(`${rel}: sideways on floor ${to.floor}`);
    }
  }
  return found;
}

describe('source layers', () => {
  it('no import runs up a floor or sideways into another part of the same floor', () => {
    expect(violations()).toEqual([]);
  });

  it('the root of src holds only the public entry and the CLI', () => {
    const loose = readdirSync(join(root, 'src'), { withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => e.name)
      .sort();
    expect(loose.filter((name) => name !== 'cli.ts' && name !== 'index.ts')).toEqual([]);
  });
});
