import { escapeMarkdownV2, TelegramFormatConverter } from '@chat-adapter/telegram';
import { type Adapter, type Code, type Content, type Link, type Root, tableToAscii } from 'chat';
import {
  markdownV2Message,
  richMessage,
  TelegramRichRefusedError,
} from '../../platforms/telegram-messages.js';
import {
  footnotesAsText,
  headingsAsBold,
  intrawordAsText,
  listText,
  markdownBlock,
  taskBoxesAsText,
} from './common.js';
import { type PlatformReplies, type ReplyFormat, renderReply } from './format.js';
import { type Phrasing, resolveReferences, rootOf } from './markdown.js';

/**
 * Telegram, two ways:
 * - **rich** (Bot API 10.1 `sendRichMessage`, up to 32,768 characters): the model's Markdown
 *   as it wrote it, which Telegram renders itself; what the adapter sends for `{ markdown }`.
 * - **classic** (`sendMessage` with `parse_mode: MarkdownV2`, 4,096 characters), where the Bot
 *   API has no rich messages: the adapter's own MarkdownV2 converter, given a tree it renders
 *   validly. Left to itself it writes Markdown Telegram refuses with "can't parse entities" or
 *   shows wrongly: bold inside a heading (`**x**`), inline code inside bold, a heading or a
 *   link (the Bot API nests no entity in code), a quote inside a list or a quote (`>` mid-line),
 *   a code block inside a quote, links without a usable URL, adjacent italics (`_a__b_` reads
 *   as underline), footnotes dropped, nested list items flush left. `forMarkdownV2` reshapes those first; every corpus output
 *   is checked by a MarkdownV2 parser written to the Bot API's rules
 *   (src/fake-telegram/markdown-v2.ts), which the fake Bot API applies too.
 * A rich part the Bot API refuses goes out as classic parts (`post`).
 */
const converter = new TelegramFormatConverter();

export const telegramRichFormat: ReplyFormat = {
  id: 'telegram-rich.1',
  limit: 32_768,
  prepare: (root) => resolveReferences(root),
  block: markdownBlock,
  message: richMessage,
};

export const telegramClassicFormat: ReplyFormat = {
  id: 'telegram-classic.1',
  limit: 4096,
  prepare: (root, doc) =>
    forMarkdownV2(
      headingsAsBold(footnotesAsText(taskBoxesAsText(intrawordAsText(resolveReferences(root), doc)))),
    ),
  block: classicBlock,
  message: markdownV2Message,
};

export const telegramReplies: PlatformReplies = {
  formats: [telegramRichFormat, telegramClassicFormat],
  choose: (adapter: Adapter) =>
    (adapter as { richMessages?: boolean }).richMessages === false
      ? telegramClassicFormat
      : telegramRichFormat,
  async post(adapter, threadId, part) {
    try {
      await adapter.postMessage(threadId, part.message);
    } catch (err) {
      if (!(err instanceof TelegramRichRefusedError)) throw err;
      // Nothing was sent: the part as classic messages, in order. A crash between two of them
      // sends the earlier ones again (the part is one step of the reply's cursor).
      for (const classic of renderReply(part.text, telegramClassicFormat).parts) {
        await adapter.postMessage(threadId, classic.message);
      }
    }
  },
};

/** The adapter's converter, but lists with their nesting (it puts every nested item flush left). */
function classicBlock(node: Content): string {
  if (node.type === 'list') {
    return listText(node, classicBlock, (ordered, n) => (ordered ? escapeMarkdownV2(`${n}.`) : '\\-'));
  }
  return converter.fromAst(rootOf([node]));
}

const SCHEMES = /^(?:https?|tg|mailto|tel):/i;
const LANG = /^[A-Za-z0-9_+#.-]{1,32}$/;

/** The tree reshaped so the adapter's MarkdownV2 renderer writes what the Bot API accepts. */
export function forMarkdownV2(root: Root): Root {
  return { ...root, children: blocks(root.children, false) };
}

function blocks(nodes: readonly Content[], nested: boolean): Content[] {
  const out: Content[] = [];
  for (const node of nodes) {
    switch (node.type) {
      case 'table':
        out.push(codeOf(tableToAscii(node)));
        break;
      case 'code':
        out.push({ ...node, lang: node.lang && LANG.test(node.lang) ? node.lang : null, meta: null });
        break;
      case 'blockquote': {
        const inner = blocks(node.children, true);
        // Quotes nest in nothing (`>` only starts a line) and hold no code block.
        if (nested) out.push(...inner);
        else out.push(...quoteAround(inner));
        break;
      }
      case 'list':
        out.push({
          ...node,
          children: node.children.map((item) => ({
            ...item,
            children: blocks(item.children, true) as typeof item.children,
          })),
        });
        break;
      case 'paragraph':
      case 'heading':
        out.push({ ...node, children: inline(node.children, new Set()) } as Content);
        break;
      case 'definition':
        break;
      default:
        out.push(node);
    }
  }
  return out;
}

function codeOf(value: string): Code {
  return { type: 'code', lang: null, meta: null, value };
}

/** A quote's blocks in quotes, with its code blocks between them. */
function quoteAround(inner: Content[]): Content[] {
  const out: Content[] = [];
  let run: Content[] = [];
  const flush = () => {
    if (run.length > 0) out.push({ type: 'blockquote', children: run as never });
    run = [];
  };
  for (const node of inner) {
    if (node.type === 'code') {
      flush();
      out.push(node);
    } else run.push(node);
  }
  flush();
  return out;
}

type Open = Set<'strong' | 'emphasis' | 'delete' | 'link'>;

/**
 * Inline content as the Bot API nests entities: no entity inside inline code, none inside
 * itself (dropped: `*a *b* c*` would end early), inline code lifted out of bold, italic and
 * strike (cutting them around it) and shown as text inside a link; a link needs an absolute
 * URL Telegram opens (else `text (url)`) and some text; no empty entities; italics side by
 * side merged.
 */
function inline(nodes: readonly Phrasing[], open: Open): Phrasing[] {
  const out: Phrasing[] = [];
  const push = (node: Phrasing) => {
    const last = out.at(-1);
    if (
      last &&
      (node.type === 'emphasis' || node.type === 'strong' || node.type === 'delete') &&
      last.type === node.type
    ) {
      out[out.length - 1] = { ...last, children: [...last.children, ...node.children] } as Phrasing;
    } else out.push(node);
  };
  for (const node of nodes) {
    switch (node.type) {
      case 'strong':
      case 'emphasis':
      case 'delete': {
        const kids = inline(node.children, new Set([...open, node.type]));
        if (open.has(node.type)) {
          for (const kid of kids) push(kid);
          break;
        }
        // Code may not be part of bold, italic or strike: cut the span around it.
        let run: Phrasing[] = [];
        const flush = () => {
          if (run.some((k) => k.type !== 'text' || k.value.trim()))
            push({ ...node, children: run } as Phrasing);
          else for (const k of run) push(k);
          run = [];
        };
        for (const kid of kids) {
          if (kid.type === 'inlineCode') {
            flush();
            push(kid);
          } else run.push(kid);
        }
        flush();
        break;
      }
      case 'link':
      case 'image':
        for (const kid of link(node, open)) push(kid);
        break;
      case 'inlineCode':
        if (!node.value) break;
        push(open.has('link') ? { type: 'text', value: node.value } : node);
        break;
      case 'text':
        if (node.value) push(node);
        break;
      case 'linkReference':
        for (const kid of inline(node.children, open)) push(kid);
        break;
      case 'imageReference':
        push({ type: 'text', value: node.alt ?? node.label ?? node.identifier });
        break;
      default:
        push(node);
    }
  }
  return out;
}

function link(node: Link | Extract<Phrasing, { type: 'image' }>, open: Open): Phrasing[] {
  const kids: Phrasing[] =
    node.type === 'image'
      ? [{ type: 'text', value: node.alt || node.url }]
      : inline(node.children, new Set([...open, 'link']));
  const usable = SCHEMES.test(node.url) && URL.canParse(node.url) && !open.has('link');
  if (!usable) return [...kids, { type: 'text', value: kids.length > 0 ? ` (${node.url})` : node.url }];
  const shown = kids.some((k) => k.type !== 'text' || k.value.trim());
  return [
    {
      type: 'link',
      url: node.url,
      title: null,
      children: shown ? kids : [{ type: 'text', value: node.url }],
    },
  ];
}
