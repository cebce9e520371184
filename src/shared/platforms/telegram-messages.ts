import type { AdapterPostableMessage } from 'chat';

/**
 * What chatlane's Telegram reply formats (src/shared/delivery/render/telegram.ts) tell its
 * adapter (./telegram-adapter.ts) beyond the Chat SDK's message shapes, keyed by the message
 * object the adapter is handed:
 * - a classic part is MarkdownV2 chatlane rendered and checked: `{ raw }` posted with
 *   `parse_mode: MarkdownV2` (the adapter would send `raw` as plain text), and its plain text
 *   for the adapter's retry should Telegram still refuse the entities;
 * - a rich part is Markdown for `sendRichMessage`: if the Bot API refuses rich messages, the
 *   adapter must not fall back on its own (it would render the part as MarkdownV2 and cut it
 *   at 4,096 characters) but throw `TelegramRichRefusedError`, so the format sends the part
 *   as classic messages, split to their limit.
 */
const classic = new WeakMap<object, { plain: string }>();
const rich = new WeakSet<object>();

export function markdownV2Message(text: string): AdapterPostableMessage {
  const message = { raw: text };
  classic.set(message, { plain: markdownV2Plain(text) });
  return message;
}

export function classicPart(message: unknown): { plain: string } | undefined {
  return typeof message === 'object' && message !== null ? classic.get(message) : undefined;
}

export function richMessage(markdown: string): AdapterPostableMessage {
  const message = { markdown };
  rich.add(message);
  return message;
}

export function isRichPart(message: unknown): boolean {
  return typeof message === 'object' && message !== null && rich.has(message);
}

export class TelegramRichRefusedError extends Error {
  constructor() {
    super('the Bot API does not take rich messages');
    this.name = 'TelegramRichRefusedError';
  }
}

/** MarkdownV2's text without its markup: escapes resolved, entity markers dropped. */
export function markdownV2Plain(text: string): string {
  let out = '';
  let code = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (c === '\\' && i + 1 < text.length) {
      out += text.charAt(i + 1);
      i += 1;
    } else if (c === '`') {
      code = !code;
      if (text.startsWith('``', i + 1)) i += 2;
    } else if (code || !'*_~|'.includes(c)) {
      out += c;
    }
  }
  return out;
}
