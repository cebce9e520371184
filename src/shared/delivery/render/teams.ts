import { TeamsFormatConverter } from '@chat-adapter/teams';
import { type Content, type Root, tableToAscii } from 'chat';
import { converterBlock, forConverter } from './common.js';
import { oneFormat, type ReplyFormat } from './format.js';
import { mapTree } from './markdown.js';

/**
 * Microsoft Teams: Markdown (`textFormat: markdown`) through `@chat-adapter/teams`' own
 * converter. Teams' text messages show a subset of Markdown: no headings, no strikethrough,
 * no tables (Microsoft's "Format your bot messages"), so a heading is a bold line, a
 * strikethrough its plain text and a table aligned text in a code block (the adapter writes
 * a GFM table, which Teams shows as pipes). Footnotes and images (dropped by the converter)
 * are text and links. A bot message may be 40 KB of UTF-16 with its
 * envelope: 16,000 characters of text leave room for it.
 */
const converter = new TeamsFormatConverter();

function forTeams(root: Root): Root {
  return mapTree(root, (node): Content | Content[] => {
    if (node.type === 'delete') return node.children as Content[];
    if (node.type === 'table') return { type: 'code', lang: null, meta: null, value: tableToAscii(node) };
    return node;
  });
}

export const teamsFormat: ReplyFormat = {
  id: 'teams.1',
  limit: 16_000,
  prepare: (root, doc) => forTeams(forConverter(root, doc, /^(?:https?|mailto):/i)),
  block: converterBlock(converter),
  message: (text) => ({ raw: text }),
};

export const teamsReplies = oneFormat(teamsFormat);
