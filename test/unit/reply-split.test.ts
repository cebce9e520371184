import { parseMarkdown, toPlainText } from 'chat';
import { describe, expect, it } from 'vitest';
import { parseMarkdownV2 } from '../../src/fake-telegram/markdown-v2.js';
import { discordFormat } from '../../src/shared/delivery/render/discord.js';
import { type ReplyFormat, renderReply } from '../../src/shared/delivery/render/format.js';
import { rootOf } from '../../src/shared/delivery/render/markdown.js';
import { slackFormat } from '../../src/shared/delivery/render/slack.js';
import { splitBlocks } from '../../src/shared/delivery/render/split.js';
import { telegramClassicFormat } from '../../src/shared/delivery/render/telegram.js';
import { whatsappFormat } from '../../src/shared/delivery/render/whatsapp.js';
import { hostileTexts, prng } from '../helpers/hostile-text.js';
import { REPLY_FORMATS, sizeIn } from '../helpers/reply-formats.js';

/**
 * How a reply longer than a platform's limit is split (src/shared/delivery/render/split.ts):
 * nothing lost or reordered, every message within the limit, cut at paragraph, then sentence,
 * then word, then grapheme boundaries, code blocks never cut open.
 */
const words = (text: string) => text.split(/\s+/).filter(Boolean);
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The text a person reads, in order, of a Markdown reply and of its split blocks. */
function splitPlain(markdown: string, limit: number): { whole: string; parts: string[] } {
  const root = parseMarkdown(markdown);
  const size = (node: Parameters<typeof toPlainText>[0]['children'][number]) =>
    toPlainText(rootOf([node])).length;
  const groups = splitBlocks(root.children, { size, limit, gap: 2 });
  return {
    whole: toPlainText(root),
    parts: groups.map((blocks) => toPlainText(rootOf(blocks))),
  };
}

const sentences = (n: number, seed = 1) => {
  const rand = prng(seed);
  return Array.from(
    { length: n },
    (_, i) => `Sentence ${i} says ${'something '.repeat(1 + Math.floor(rand() * 12))}and ends.`,
  ).join(' ');
};

describe('splitting a reply', () => {
  it('loses nothing and keeps the order: the parts read, one after the other, as the whole', () => {
    const corpus = { ...hostileTexts(9000, 7), sentences: sentences(300), markdown: longMarkdown() };
    for (const [name, text] of Object.entries(corpus)) {
      for (const limit of [500, 2000, 4096]) {
        const { whole, parts } = splitPlain(text, limit);
        if (name !== 'whitespace') expect(parts.length, `${name} at ${limit}`).toBeGreaterThan(1);
        // Cuts fall on whitespace, or (a word longer than the limit) between graphemes.
        expect(parts.join('').replace(/\s+/g, ''), `${name} at ${limit}`).toBe(whole.replace(/\s+/g, ''));
        if (name === 'sentences' || name === 'englishProse')
          expect(words(parts.join(' '))).toEqual(words(whole));
      }
    }
  });

  it('keeps every message of every format within its limit, and cuts no character in half', () => {
    const corpus = { ...hostileTexts(20_000, 3), markdown: longMarkdown().repeat(4) };
    for (const [name, format] of Object.entries(REPLY_FORMATS)) {
      for (const [kind, text] of Object.entries(corpus)) {
        const { parts } = renderReply(text, format);
        for (const part of parts) {
          expect(sizeIn(format, part.text), `${name} ${kind}`).toBeLessThanOrEqual(format.limit);
          expect(LONE_SURROGATE.test(part.text), `${name} ${kind}`).toBe(false);
        }
      }
    }
  });

  it('ends a message at a paragraph boundary when the paragraphs fit', () => {
    const paragraphs = Array.from({ length: 40 }, (_, i) => `Paragraph ${i}. ${sentences(4, i)}`);
    const { parts } = renderReply(paragraphs.join('\n\n'), whatsappFormat);
    expect(parts.length).toBeGreaterThan(2);
    for (const part of parts) {
      for (const chunk of part.text.split('\n\n')) expect(paragraphs).toContain(chunk);
    }
  });

  it('cuts a paragraph longer than a message after a sentence, a sentence longer than one between words', () => {
    const paragraph = sentences(200);
    const { parts } = renderReply(paragraph, discordFormat);
    expect(parts.length).toBeGreaterThan(2);
    for (const part of parts) expect(part.text).toMatch(/^Sentence \d+ says .* and ends\.$/s);

    const sentence = `One sentence ${'with many words '.repeat(300)}and no end`;
    const cut = renderReply(sentence, discordFormat).parts;
    expect(cut.length).toBeGreaterThan(1);
    const pieces = cut.map((p) => p.text);
    expect(pieces.join(' ')).toBe(sentence);
    for (const piece of pieces.slice(0, -1)) expect(piece.endsWith('words')).toBe(true);
  });

  it('cuts a word longer than a message between graphemes: emoji, flags and families stay whole', () => {
    const family = '👨‍👩‍👧‍👦';
    const word = `${'🇩🇪'.repeat(400)}${family.repeat(200)}${'x'.repeat(3000)}`;
    const { parts } = renderReply(word, discordFormat);
    expect(parts.map((p) => p.text).join('')).toBe(word);
    expect(
      parts
        .map((p) => p.text)
        .filter((t) => t.includes(family) && !t.split(family).every((s) => !s.includes('\u200d'))),
    ).toEqual([]);
  });

  it('never cuts a code block open: each piece is a fenced block of whole lines with the language', () => {
    const lines = Array.from({ length: 400 }, (_, i) => `const value${i} = compute(${i}); // line ${i}`);
    const markdown = `Here:\n\n\`\`\`ts\n${lines.join('\n')}\n\`\`\`\n\nDone.`;
    for (const format of [
      whatsappFormat,
      discordFormat,
      telegramClassicFormat,
      slackFormat,
    ] as ReplyFormat[]) {
      const { parts } = renderReply(markdown, format);
      expect(parts.length).toBeGreaterThan(1);
      const code: string[] = [];
      for (const part of parts) {
        const fences = part.text.split('\n').filter((l) => l.startsWith('```'));
        expect(fences.length % 2, format.id).toBe(0);
        for (const m of part.text.matchAll(/```(\w*)\n([\s\S]*?)\n```/g)) {
          if (format !== whatsappFormat) expect(m[1], format.id).toBe('ts');
          code.push(...m[2]!.split('\n'));
        }
      }
      expect(code, format.id).toEqual(lines);
    }
  });

  it('numbers an ordered list on across messages', () => {
    const items = Array.from({ length: 120 }, (_, i) => `${i + 1}. ${'step '.repeat(8)}number ${i + 1}`);
    const { parts } = renderReply(items.join('\n'), discordFormat);
    expect(parts.length).toBeGreaterThan(1);
    const numbers = parts.flatMap((p) => p.text.split('\n').map((l) => Number(l.split('.')[0])));
    expect(numbers).toEqual(items.map((_, i) => i + 1));
  });

  it('repeats a table’s header row in every piece of a table longer than a message', () => {
    const rows = Array.from({ length: 600 }, (_, i) => `| row ${i} | ${'cell '.repeat(4)} |`);
    const table = `| name | value |\n|---|---|\n${rows.join('\n')}`;
    const { parts } = renderReply(table, slackFormat);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts)
      expect(part.text.split('\n').slice(0, 2).join('\n')).toMatch(/^\| name +\| value +\|\n\|/);
  });

  it('keeps a heading with what it heads', () => {
    const section = (i: number) => `## Section ${i}\n\n${sentences(8, i)}`;
    const { parts } = renderReply(
      Array.from({ length: 30 }, (_, i) => section(i)).join('\n\n'),
      whatsappFormat,
    );
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) expect(part.text.trimEnd()).not.toMatch(/\*Section \d+\*$/);
  });

  it('is deterministic: the same reply gives the same messages (a partly sent reply resumes on them)', () => {
    const text = longMarkdown().repeat(3);
    for (const format of Object.values(REPLY_FORMATS)) {
      expect(renderReply(text, format)).toEqual(renderReply(text, format));
    }
  });
});

describe('Telegram classic (MarkdownV2)', () => {
  const ALPHABET = [
    '*',
    '**',
    '_',
    '__',
    '~~',
    '`',
    '```',
    '[',
    ']',
    '(',
    ')',
    '![',
    '](https://e.com/a_b)',
    '> ',
    '\n',
    '\n\n',
    '- ',
    '1. ',
    '# ',
    '|',
    '|---|',
    '\\',
    '<b>',
    '&amp;',
    '.',
    '!',
    '#',
    '+',
    '=',
    '{',
    '}',
    'word',
    ' ',
    '2*3',
    'https://example.com/x_(y)',
    '[^1]',
    '[x]: https://e.com',
    '😀',
    'مرحبا',
    '    code',
  ];

  it('every message of any Markdown, however broken, is MarkdownV2 the Bot API parses, within 4,096 characters', () => {
    const rand = prng(2024);
    for (let n = 0; n < 400; n++) {
      let text = '';
      const length = 1 + Math.floor(rand() * 60);
      for (let i = 0; i < length; i++) text += ALPHABET[Math.floor(rand() * ALPHABET.length)];
      for (const part of renderReply(text, telegramClassicFormat).parts) {
        const parsed = parseMarkdownV2(part.text);
        expect(parsed, JSON.stringify({ text, part: part.text })).toMatchObject({ ok: true });
      }
    }
    for (const text of Object.values(hostileTexts(9000, 5))) {
      for (const part of renderReply(text, telegramClassicFormat).parts) {
        const parsed = parseMarkdownV2(part.text);
        expect(parsed.ok).toBe(true);
        if (parsed.ok) expect(parsed.text.length).toBeLessThanOrEqual(4096);
      }
    }
  });

  it('the check has teeth: the adapter’s own MarkdownV2 of the same inputs is refused, chatlane’s is not', async () => {
    const { TelegramFormatConverter } = await import('@chat-adapter/telegram');
    const converter = new TelegramFormatConverter();
    for (const text of ['**bold `code`**', '> a\n>\n> > b', '[`x`](https://e.com)', '[x](/relative)']) {
      expect(parseMarkdownV2(converter.fromMarkdown(text)).ok, text).toBe(false);
      for (const part of renderReply(text, telegramClassicFormat).parts) {
        expect(parseMarkdownV2(part.text).ok, text).toBe(true);
      }
    }
  });

  it('shows what the adapter shows wrongly though Telegram parses it: a bold heading, code in a quote', async () => {
    const { TelegramFormatConverter } = await import('@chat-adapter/telegram');
    const converter = new TelegramFormatConverter();
    const show = (markdown: string) => {
      const parsed = parseMarkdownV2(markdown);
      return parsed.ok ? parsed.text : parsed.error;
    };
    // `**Bold heading**`: an empty bold, the text, an empty bold.
    expect(converter.fromMarkdown('# **Bold heading**')).toBe('**Bold heading**');
    expect(renderReply('# **Bold heading**', telegramClassicFormat).parts[0]!.text).toBe('*Bold heading*');
    const quoted = '> quote\n>\n> ```\n> code\n> ```';
    expect(show(converter.fromMarkdown(quoted))).toContain('>code');
    expect(show(renderReply(quoted, telegramClassicFormat).parts[0]!.text)).toBe('quote\n\ncode\n');
  });
});

/** A long answer of the usual shapes. */
function longMarkdown(): string {
  return [
    '# Report',
    sentences(30, 2),
    '- one **bold** item\n- two `code` items\n  - nested [link](https://example.com/a_b)',
    '```js\nconst a = 1;\nconst b = a * 2;\n```',
    '| a | b |\n|---|---|\n| 1 | 2 |',
    '> quoted text with _emphasis_\n> on two lines',
    sentences(20, 3),
  ].join('\n\n');
}
