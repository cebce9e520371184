import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseMarkdownV2 } from '../../src/fake-telegram/markdown-v2.js';
import { renderReply, type SplitReply } from '../../src/shared/delivery/render/format.js';
import { REPLY_FORMATS, sizeIn } from '../helpers/reply-formats.js';

/**
 * Typical model outputs (test/fixtures/reply-corpus/*.md: lists, citations, code, tables,
 * headings, links, bare URLs, emphasis inside words, arithmetic, `<` `>` `&`, emoji, RTL, a
 * 10,000-character answer, …) through every platform's reply format, against the text each
 * platform is expected to receive, checked in beside them (<format>/<name>.txt; the messages
 * of a split reply one after the other, between separator lines). After a deliberate change
 * to a format, `UPDATE_REPLY_CORPUS=1 npx vitest run test/unit/reply-corpus.test.ts` writes
 * the files anew; read the diff before committing it.
 */
const DIR = new URL('../fixtures/reply-corpus/', import.meta.url);
const UPDATE = process.env.UPDATE_REPLY_CORPUS === '1';
const INPUTS = readdirSync(DIR)
  .filter((f) => f.endsWith('.md'))
  .sort();

const separator = (n: number, of: number) => `\n\n──────── message ${n} of ${of} ────────\n\n`;

function joined(reply: SplitReply): string {
  const { parts } = reply;
  if (parts.length === 1) return `${parts[0]!.text}\n`;
  return `${parts.map((p, i) => (i === 0 ? p.text : `${separator(i + 1, parts.length)}${p.text}`)).join('')}\n`;
}

const source = (file: string) => readFileSync(new URL(file, DIR), 'utf8');

describe('the reply corpus', () => {
  it('has about thirty typical model outputs, one of them 10,000 characters long', () => {
    expect(INPUTS.length).toBeGreaterThanOrEqual(30);
    expect(INPUTS.map(source).some((t) => t.length >= 10_000)).toBe(true);
  });
});

describe.each(Object.entries(REPLY_FORMATS))('%s', (name, format) => {
  it.each(INPUTS)('%s is what the platform is expected to receive, each message within its limit', (file) => {
    const reply = renderReply(source(file), format);
    const expected = new URL(`${name}/${file.replace(/\.md$/, '.txt')}`, DIR);
    if (UPDATE) {
      mkdirSync(new URL(`${name}/`, DIR), { recursive: true });
      writeFileSync(expected, joined(reply));
    }
    expect(joined(reply)).toBe(readFileSync(expected, 'utf8'));
    expect(reply.format).toBe(format.id);
    for (const part of reply.parts) {
      expect(part.text.trim()).not.toBe('');
      expect(sizeIn(format, part.text)).toBeLessThanOrEqual(format.limit);
    }
  });
});

describe('what the corpus shows per platform', () => {
  const all = (name: string) =>
    INPUTS.map((file) => ({ file, reply: renderReply(source(file), REPLY_FORMATS[name]!) }));

  it('Telegram classic: every message is MarkdownV2 the Bot API parses, within 4,096 characters after parsing', () => {
    for (const { file, reply } of all('telegram-classic')) {
      for (const part of reply.parts) {
        const parsed = parseMarkdownV2(part.text);
        expect(parsed, `${file}: ${part.text}`).toMatchObject({ ok: true });
        if (parsed.ok) expect(parsed.text.length).toBeLessThanOrEqual(4096);
      }
    }
  });

  it('WhatsApp: no backslash escape and no HTML character reference the model did not write', () => {
    for (const { file, reply } of all('whatsapp')) {
      const text = source(file);
      const written = (re: RegExp) => (text.match(re) ?? []).length;
      const sent = reply.parts.map((p) => p.text).join('\n');
      expect((sent.match(/\\[!-/:-@[-`{-~]/g) ?? []).length, file).toBeLessThanOrEqual(written(/\\/g));
      expect((sent.match(/&#?\w+;/g) ?? []).length, file).toBeLessThanOrEqual(written(/&#?\w+;/g));
    }
  });

  it('no message of any format cuts a code block open: its fences pair up', () => {
    for (const [name, format] of Object.entries(REPLY_FORMATS)) {
      for (const file of [
        '05-fenced-code.md',
        '15-long-answer.md',
        '26-json-code.md',
        '32-long-code-block.md',
      ]) {
        for (const part of renderReply(source(file), format).parts) {
          const fences = part.text.split('\n').filter((line) => /^(?:> )?```/.test(line.trim()));
          expect(fences.length % 2, `${name} ${file}`).toBe(0);
        }
      }
    }
  });
});
