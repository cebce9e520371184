import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/ingress/errors.js';

/**
 * docs/http-api.md's error-code table is the registry in src/ingress/errors.ts: every code with
 * its status, and no code the registry does not have.
 */

const page = readFileSync(new URL('../../docs/http-api.md', import.meta.url), 'utf8');

/** `| \`CODE\` | 400 | when |` rows of the table under "## Error codes". */
function documentedCodes(markdown: string): Map<string, number> {
  const section = markdown.split(/^## Error codes$/m)[1]?.split(/^## /m)[0] ?? '';
  const rows = [...section.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \|/gm)];
  return new Map(rows.map((m) => [m[1]!, Number(m[2])]));
}

describe('docs/http-api.md error codes', () => {
  it('list every code of the registry with its status, and nothing else', () => {
    expect(Object.fromEntries(documentedCodes(page))).toEqual(ERROR_CODES);
  });

  it('the reader finds a missing and a wrong row', () => {
    const table =
      '## Error codes\n\n| code | status | when |\n|---|---|---|\n| `NOT_FOUND` | 404 | x |\n| `CHAT_FULL` | 400 | y |\n';
    expect(Object.fromEntries(documentedCodes(table))).toEqual({ NOT_FOUND: 404, CHAT_FULL: 400 });
  });
});
