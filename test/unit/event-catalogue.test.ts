import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/shared/events.js';

const src = resolve(import.meta.dirname, '../../src');

function files(dir: string, ext: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return files(path, ext);
    return e.name.endsWith(ext) ? [path] : [];
  });
}

/** The event types the code writes: every `'a.b'` literal of the Lua scripts, and what TypeScript appends. */
function writtenTypes(): Set<string> {
  const types = new Set<string>();
  for (const file of files(join(src, 'shared/store/lua'), '.lua')) {
    for (const m of readFileSync(file, 'utf8').matchAll(/'([a-z]+\.[a-z-]+)'/g)) types.add(m[1]!);
  }
  for (const file of files(src, '.ts')) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/appendEvent\(\s*[^,]+,\s*'([a-z]+\.[a-z-]+)'/g)) types.add(m[1]!);
    for (const m of text.matchAll(/event: \{ type: '([a-z]+\.[a-z-]+)'/g)) types.add(m[1]!);
  }
  return types;
}

describe('the event catalogue', () => {
  it('has a typed schema for every event type the code writes, and no type nothing writes', () => {
    const written = writtenTypes();
    expect([...written].filter((t) => !(EVENT_TYPES as string[]).includes(t)).sort()).toEqual([]);
    expect(EVENT_TYPES.filter((t) => !written.has(t)).sort()).toEqual([]);
  });

  it.each(['events.md', 'troubleshooting.md'])(
    'docs/%s has a row for every type, in the same order, and none more',
    (page) => {
      const text = readFileSync(resolve(src, '../docs', page), 'utf8');
      const rows = [...text.matchAll(/^\| `([a-z]+\.[a-z-]+)` \|/gm)].map((m) => m[1]);
      expect(rows).toEqual(EVENT_TYPES);
    },
  );
});
