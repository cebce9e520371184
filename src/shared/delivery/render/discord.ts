import { DiscordFormatConverter } from '@chat-adapter/discord';
import type { Root } from 'chat';
import { converterBlock, headingsAsBold, intrawordAsText, taskBoxesAsText } from './common.js';
import { oneFormat, type ReplyFormat } from './format.js';
import { inlineText, mapTree, type Phrasing, resolveReferences } from './markdown.js';

/**
 * Discord: its Markdown dialect through `@chat-adapter/discord`'s own converter (masked links,
 * tables as aligned text in a code block, `<@name>` mentions), 2,000 characters a message.
 * Routed around:
 * - the adapter cuts any message past 2,000 characters to 1,997 and `...`, silently
 *   (test/unit/upstream-chat-adapters.test.ts): parts never get there;
 * - its converter writes text as it is: a `*` or `_` the model escaped would turn into
 *   emphasis, so the characters Discord reads as markup are escaped in text (not in a link
 *   whose text is its URL);
 * - it drops headings' marks: a heading is a bold line, as on the other chat platforms;
 * - emphasis inside a word (`2*3*4`) stays as written, escaped.
 */
const converter = new DiscordFormatConverter();
const MARKUP = /[\\*_~`|]/g;

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
  prepare: (root, doc) =>
    escapeText(headingsAsBold(taskBoxesAsText(intrawordAsText(resolveReferences(root), doc)))),
  block: converterBlock(converter),
  message: (text) => ({ raw: text }),
};

export const discordReplies = oneFormat(discordFormat);
