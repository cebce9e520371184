import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { docs, repoRoot } from '../helpers/docs.js';

/**
 * Reference pages say what is. History (what an issue asked, what the code did before, which
 * commit a figure was taken at, throwaway measurements) belongs in the CHANGELOG, the git log
 * and docs/benchmarks-history.md; a reader of the reference cannot follow an internal issue
 * number or a commit of a branch they never saw.
 */

const JOURNAL: { name: string; pattern: RegExp }[] = [
  { name: 'an internal issue number', pattern: /\bissues? #?\d+/gi },
  { name: 'what the code did before', pattern: /\bbefore this change\b/gi },
  { name: 'a commit of the main branch', pattern: /\bmain at `?[0-9a-f]{7,40}\b/gi },
  { name: 'a throwaway measurement', pattern: /\bscratch/gi },
];

function journalLines(path: string, text: string, rules = JOURNAL): string[] {
  const found: string[] = [];
  text.split('\n').forEach((line, i) => {
    for (const { name, pattern } of rules) {
      for (const m of line.matchAll(pattern)) found.push(`${path}:${i + 1}: ${name}: "${m[0]}"`);
    }
  });
  return found;
}

const HISTORY = new Set(['docs/benchmarks-history.md']);

describe('reference pages read as a reference, not a journal', () => {
  it('README.md and docs/ name no issue, earlier state, main-branch commit or scratch run', () => {
    const pages = docs().filter((d) => !HISTORY.has(d.path));
    expect(pages.length).toBeGreaterThan(10);
    expect(pages.flatMap((d) => journalLines(d.path, d.text))).toEqual([]);
  });

  it('CHANGELOG.md describes changes without internal issue numbers', () => {
    const text = readFileSync(join(repoRoot, 'CHANGELOG.md'), 'utf8');
    expect(journalLines('CHANGELOG.md', text, JOURNAL.slice(0, 1))).toEqual([]);
  });

  it('the checker catches each kind of journal line and lets ordinary prose through', () => {
    const text = [
      'Fixed in issue 12, see issue #7.',
      'Before this change the worker polled.',
      'Measured on main at da4e39b.',
      'A scratch run, not kept.',
      'The issuer signs 12 tokens; a tissue of 3 layers; maintain at 5 s.',
    ].join('\n');
    expect(journalLines('x.md', text).map((l) => l.replace(/^x\.md:\d+: /, ''))).toEqual([
      'an internal issue number: "issue 12"',
      'an internal issue number: "issue #7"',
      'what the code did before: "Before this change"',
      'a commit of the main branch: "main at da4e39b"',
      'a throwaway measurement: "scratch"',
    ]);
  });
});
