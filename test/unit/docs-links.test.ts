import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchors, docs, linkTargets, repoRoot } from '../helpers/docs.js';

/**
 * Every relative link in README.md and docs/ resolves: the file or folder exists inside the
 * repository, and a `#anchor` names a heading of the page it points to (GitHub's slugs). The
 * README stays a front door and the benchmarks page a summary: both have a size cap.
 */

const all = docs();

function broken(path: string, text: string): string[] {
  const problems: string[] = [];
  for (const target of linkTargets(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
    const [file, anchor] = target.split('#', 2) as [string, string | undefined];
    const resolved = file === '' ? join(repoRoot, path) : join(repoRoot, dirname(path), decodeURI(file));
    const inside = relative(repoRoot, resolved);
    if (inside.startsWith('..')) {
      problems.push(`${path}: ${target} leaves the repository`);
      continue;
    }
    if (!existsSync(resolved)) {
      problems.push(`${path}: ${target}: no such file`);
      continue;
    }
    if (anchor === undefined) continue;
    if (!resolved.endsWith('.md') || statSync(resolved).isDirectory()) {
      problems.push(`${path}: ${target}: an anchor into a file that is not Markdown`);
      continue;
    }
    const page = file === '' ? text : readFileSync(resolved, 'utf8');
    if (!anchors(page).has(anchor)) {
      problems.push(`${path}: ${target}: no heading with that anchor`);
    }
  }
  return problems;
}

describe('links in README.md and docs/', () => {
  it('reads the README and the pages under docs/', () => {
    const paths = all.map((d) => d.path);
    expect(paths).toContain('README.md');
    expect(paths).toContain('docs/design.md');
    expect(paths).toContain('docs/configuration.md');
  });

  it('every relative link and anchor resolves', () => {
    expect(all.flatMap((d) => broken(d.path, d.text))).toEqual([]);
  });

  it('the checker finds a missing file, a missing anchor and a link out of the repository', () => {
    const text = [
      '# Title',
      '## A `code` heading: yes',
      '[ok](#title) [ok](#a-code-heading-yes) [ok](docs/design.md) [ok](https://example.com/x)',
      '[bad](#nope) [bad](docs/nope.md) [bad](../outside.md) `[in code](#ignored)`',
    ].join('\n');
    expect(broken('README.md', text)).toEqual([
      'README.md: #nope: no heading with that anchor',
      'README.md: docs/nope.md: no such file',
      'README.md: ../outside.md leaves the repository',
    ]);
  });

  it('repeated headings get numbered anchors, as on GitHub', () => {
    expect([...anchors('## Notes\n## Notes\n```\n# not a heading\n```\n### Notes')]).toEqual([
      'notes',
      'notes-1',
      'notes-2',
    ]);
  });
});

describe('page sizes', () => {
  const size = (path: string) => Buffer.byteLength(all.find((d) => d.path === path)!.text);

  it('the README is a front door: at most 20 KB', () => {
    expect(size('README.md')).toBeLessThanOrEqual(20 * 1024);
  });

  it('the benchmarks page gives current figures, not a journal: at most 25 KB', () => {
    expect(size('docs/benchmarks.md')).toBeLessThanOrEqual(25 * 1024);
  });
});

describe('the concepts page', () => {
  /** Generated, measured or for contributors: not pages a newcomer reads for the terms. */
  const EXEMPT = new Set([
    'docs/concepts.md',
    'docs/configuration.md',
    'docs/benchmarks.md',
    'docs/benchmarks-history.md',
    'docs/development.md',
  ]);

  it('is linked from every reference page, so a term is one click away', () => {
    const missing = docs()
      .filter((d) => d.path.startsWith('docs/') && !EXEMPT.has(d.path))
      .filter((d) => !d.text.includes('](concepts.md'))
      .map((d) => d.path);
    expect(missing).toEqual([]);
  });
});
