import { GoogleChatFormatConverter } from '@chat-adapter/gchat';
import { converterBlock, forConverter } from './common.js';
import { oneFormat, type ReplyFormat } from './format.js';

/**
 * Google Chat: its own syntax (`*bold*`, `_italic_`, `~strike~`, `<url|text>` links,
 * tables as aligned text in a code block) through `@chat-adapter/gchat`'s own converter,
 * 4,096 characters a message (a message's whole body may be 32,000 bytes). Routed around: it
 * shows a heading as plain text (here a bold line) and drops footnotes and images (here text
 * and links), and emphasis inside a word (`2*3*4`) stays as written (Google Chat's markers
 * need a word boundary).
 */
const converter = new GoogleChatFormatConverter();

export const gchatFormat: ReplyFormat = {
  id: 'gchat.1',
  limit: 4096,
  prepare: (root, doc) => forConverter(root, doc, /^(?:https?|mailto):/i),
  block: converterBlock(converter),
  message: (text) => ({ raw: text }),
};

export const gchatReplies = oneFormat(gchatFormat);
