import { DiscordFormatConverter } from '@chat-adapter/discord';
import type { Root } from 'chat';
import { onlyIdMentions } from '../../platforms/discord-mentions.js';
import { converterBlock, forConverter } from './common.js';
import { oneFormat, type ReplyFormat } from './format.js';
import { inlineText, mapTree, type Phrasing } from './markdown.js';

/**
 * Discord: its Markdown dialect through `@chat-adapter/discord`'s own converter (masked
 * links, tables as aligned text in a code block), 2,000 characters a message. Routed around:
 * - the adapter cuts any message past 2,000 characters to 1,997 and `...`, silently
 *   (test/unit/upstream-chat-adapters.test.ts): parts never get there;
 * - its converter writes text as it is: a `*` or `_` the model escaped would turn into
 *   emphasis, so the characters Discord reads as markup are escaped in text (not in a link
 *   whose text is its URL);
 * - it turns every `@name` into `<@name>`, which Discord shows as typed unless the name is a
 *   user id: only ids become mentions (src/shared/platforms/discord-mentions.ts, on the
 *   adapter's converter too);
 * - it drops headings' marks, footnotes and images: a heading is a bold line, a footnote
 *   `[^1]` text, an image a link; a link Discord cannot open (relative, mailto:) is text;
 * - emphasis inside a word (`2*3*4`) stays as written, escaped.
 */
const MARKUP = /[\\*_~`|]/g;
const USABLE = /^https?:/i;

const converter = onlyIdMentions(new DiscordFormatConverter());

function escapeText(root: Root): Root {
  return mapTree(root, (node) => {
    if (node.type === 'text') {
      const value = node.value.replace(MARKUP, '\\$&');
      return value === node.value ? node : { ...node, value };
    }
    if (node.type === 'link' && (node.children as Phrasing[]).map(inlineText).join('') === node.url) {
      return { ...node, children: [{ type: 'text', value: node.url }] };
    }
    return node;
  });
}

export const discordFormat: ReplyFormat = {
  id: 'discord.1',
  limit: 2000,
  prepare: (root, doc) => escapeText(forConverter(root, doc, USABLE)),
  block: converterBlock(converter),
  message: (text) => ({ raw: text }),
};

export const discordReplies = oneFormat(discordFormat);
