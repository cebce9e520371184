import { type Content, type Link, tableToAscii } from 'chat';
import { headingsAsBold, intrawordAsText, listText, quoted, taskBoxesAsText } from './common.js';
import { oneFormat, type ReplyFormat } from './format.js';
import { type Phrasing, resolveReferences } from './markdown.js';

/**
 * WhatsApp's own syntax: `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ``` ```` blocks,
 * `- ` and `1. ` lists, `> ` quotes. It has no links, headings or tables and no escapes.
 *
 * Rendered here, not by `@chat-adapter/whatsapp`: its converter stringifies the tree with a
 * Markdown stringifier, which escapes for Markdown (`[1]` → `\[1]`, `2*3*4` → `&#x32;_&#x33;_&#x34;`,
 * a bare URL → `<https://…>`) and keeps `[text](url)`; WhatsApp shows all of it as typed.
 * test/unit/upstream-chat-adapters.test.ts shows it against the adapter alone. Here:
 * - a link is `text (url)`, or the URL alone when the text is the URL;
 * - a heading is a bold line; a table is aligned text in a code block;
 * - emphasis inside a word (`2*3*4`) stays as written (WhatsApp needs a word boundary);
 * - text is never escaped: no backslashes, no HTML entities.
 * The adapter gets `{ raw }` and posts it unchanged (it would split past 4,096 characters
 * itself; parts never get there).
 */
export const whatsappFormat: ReplyFormat = {
  id: 'whatsapp.1',
  limit: 4096,
  prepare: (root, doc) => headingsAsBold(taskBoxesAsText(intrawordAsText(resolveReferences(root), doc))),
  block: (node) => block(node).trim(),
  message: (text) => ({ raw: text }),
};

const BULLET = '-';

function block(node: Content): string {
  switch (node.type) {
    case 'paragraph':
      return inline(node.children, new Set());
    case 'heading':
      return marked('*', node.children, new Set());
    case 'thematicBreak':
      return '━━━';
    case 'code':
      return `\`\`\`\n${node.value}\n\`\`\``;
    case 'table':
      return `\`\`\`\n${tableToAscii(node)}\n\`\`\``;
    case 'blockquote':
      return quoted(node.children.map(block).filter(Boolean).join('\n'));
    case 'list':
      return listText(node, block, (ordered, n) => (ordered ? `${n}.` : BULLET));
    case 'html':
      return node.value;
    case 'footnoteDefinition':
      return `[^${node.label ?? node.identifier}]: ${node.children.map(block).filter(Boolean).join('\n')}`;
    case 'definition':
      return '';
    default:
      return 'children' in node ? (node.children as Content[]).map(block).join('') : '';
  }
}

type Marker = '*' | '_' | '~';

function inline(nodes: Phrasing[], open: Set<Marker>): string {
  return nodes.map((node) => phrase(node, open)).join('');
}

function phrase(node: Phrasing, open: Set<Marker>): string {
  switch (node.type) {
    case 'text':
    case 'html':
      return node.value;
    case 'strong':
      return marked('*', node.children, open);
    case 'emphasis':
      return marked('_', node.children, open);
    case 'delete':
      return marked('~', node.children, open);
    case 'inlineCode':
      // WhatsApp's inline code cannot hold a backtick: such code goes as plain text.
      return node.value.includes('`') ? node.value : `\`${node.value}\``;
    case 'break':
      return '\n';
    case 'link':
      return link(node, open);
    case 'image':
      return node.alt ? `${node.alt} (${node.url})` : node.url;
    case 'footnoteReference':
      return `[^${node.label ?? node.identifier}]`;
    default:
      return 'children' in node ? inline(node.children as Phrasing[], open) : '';
  }
}

/**
 * `*x*` around the content, its surrounding spaces kept outside (WhatsApp wants the marker
 * next to a character). Inside the same marker it is left out: `*a *b* c*` would end early.
 */
function marked(marker: Marker, children: Phrasing[], open: Set<Marker>): string {
  if (open.has(marker)) return inline(children, open);
  const inner = inline(children, new Set([...open, marker]));
  const core = inner.trim();
  if (!core) return inner;
  const lead = inner.slice(0, inner.indexOf(core));
  const trail = inner.slice(lead.length + core.length);
  return `${lead}${marker}${core}${marker}${trail}`;
}

/**
 * `text (url)`; the text alone when it is the URL, or the URL without its scheme (a bare
 * `www.example.com`, the address of a mailto: link): WhatsApp links those itself.
 */
function link(node: Link, open: Set<Marker>): string {
  const text = inline(node.children, open);
  const plain = text.trim();
  const bare = node.url.replace(/^(?:[a-z][a-z0-9+.-]*:\/\/|mailto:|tel:)/i, '');
  if (!plain) return node.url;
  if (plain === node.url || plain === bare) return plain;
  return `${text} (${node.url})`;
}

export const whatsappReplies = oneFormat(whatsappFormat);
