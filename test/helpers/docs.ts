import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The project's documents as the tests read them: README.md and every page under docs/. Tests
 * that run the documents' examples find a block by what it contains, wherever it lives, so a
 * page can move or split without its examples going untested.
 */

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export interface Doc {
  /** Path from the repository root, with `/` separators. */
  path: string;
  text: string;
}

function markdownUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return markdownUnder(path);
    return e.name.endsWith('.md') ? [path] : [];
  });
}

/** README.md and docs/**\/*.md. */
export function docs(): Doc[] {
  return [join(repoRoot, 'README.md'), ...markdownUnder(join(repoRoot, 'docs'))].map((file) => ({
    path: relative(repoRoot, file).split('\\').join('/'),
    text: readFileSync(file, 'utf8'),
  }));
}

export interface Block {
  doc: string;
  code: string;
}

/** Every fenced block of `lang` (```lang) in the documents. */
export function blocks(lang: string): Block[] {
  const fence = new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, 'g');
  return docs().flatMap((d) => [...d.text.matchAll(fence)].map((m) => ({ doc: d.path, code: m[1]! })));
}

/**
 * The one fenced block of `lang` that contains `marker`, in whichever document holds it.
 * Throws when none or several do, naming where they are.
 */
export function docBlock(lang: string, marker: string): Block {
  const found = blocks(lang).filter((b) => b.code.includes(marker));
  if (found.length !== 1) {
    throw new Error(
      `expected one \`\`\`${lang} block containing ${JSON.stringify(marker)} in README.md or docs/, ` +
        `found ${found.length}${found.length ? ` (${found.map((b) => b.doc).join(', ')})` : ''}`,
    );
  }
  return found[0]!;
}

/** Markdown with fenced blocks and inline code spans blanked, so their text is not read as links. */
export function prose(text: string): string {
  return text
    .replace(/^```[\s\S]*?^```/gm, (m) => m.replace(/[^\n]/g, ' '))
    .replace(/`[^`\n]*`/g, (m) => ' '.repeat(m.length));
}

/**
 * The anchors GitHub gives a document's headings: the heading's text lowercased, everything but
 * letters, digits, spaces, `-` and `_` dropped, spaces turned into `-`; a repeated slug gets
 * `-1`, `-2`, ... in order.
 */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const slug = m[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** The targets of a document's inline links and images, `[text](target)`, outside code. */
export function linkTargets(text: string): string[] {
  return [...prose(text).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
}
