import { type Content, type List, type Root, stringifyMarkdown } from 'chat';
import {
  inlineText,
  isIntraword,
  mapTree,
  type Phrasing,
  type ReplyDoc,
  resolveReferences,
  rootOf,
  sourceOf,
} from './markdown.js';

/**
 * Tree changes several formats share (each format's `prepare` picks the ones its platform
 * needs). Each keeps unchanged nodes the same objects (see `mapTree`).
 */

/** Strong wrappers dropped (a heading is shown bold already: bold inside bold is noise, or worse). */
export function unwrapStrong(nodes: Phrasing[]): Phrasing[] {
  return nodes.flatMap((n) => (n.type === 'strong' ? unwrapStrong(n.children) : [n]));
}

/** Headings as bold lines, for platforms without headings (still headings to the splitter). */
export function headingsAsBold(root: Root): Root {
  return mapTree(root, (node) =>
    node.type === 'heading'
      ? ({
          type: 'paragraph',
          data: { heading: true },
          children: [{ type: 'strong', children: unwrapStrong(node.children) }],
        } as Content)
      : node,
  );
}

/**
 * Emphasis written inside a word (`2*3*4`) kept as the characters the model wrote, for
 * platforms whose markers need a word boundary or that would change the meaning.
 */
export function intrawordAsText(root: Root, doc: ReplyDoc): Root {
  return mapTree(root, (node) => {
    if (
      (node.type === 'emphasis' || node.type === 'strong' || node.type === 'delete') &&
      isIntraword(node, doc)
    ) {
      const source = sourceOf(node, doc);
      if (source !== undefined) return { type: 'text', value: source };
    }
    return node;
  });
}

/** Task list items (`- [x] done`) with their box as text: no chat platform draws GFM task lists. */
export function taskBoxesAsText(root: Root): Root {
  return mapTree(root, (node) => {
    if (node.type !== 'listItem' || typeof node.checked !== 'boolean') return node;
    const box = node.checked ? '[x] ' : '[ ] ';
    const [first, ...rest] = node.children;
    const lead: Content =
      first?.type === 'paragraph'
        ? { ...first, children: [{ type: 'text', value: box }, ...first.children] }
        : { type: 'paragraph', children: [{ type: 'text', value: box.trim() }] };
    return {
      ...node,
      checked: null,
      children: (first?.type === 'paragraph'
        ? [lead, ...rest]
        : [lead, ...node.children]) as typeof node.children,
    };
  });
}

/**
 * Footnotes as text: a reference as `[^1]`, a definition as a paragraph starting `[^1]: `
 * (the converters drop both, and the words with them).
 */
export function footnotesAsText(root: Root): Root {
  return mapTree(root, (node): Content | Content[] => {
    if (node.type === 'footnoteReference')
      return { type: 'text', value: `[^${node.label ?? node.identifier}]` };
    if (node.type !== 'footnoteDefinition') return node;
    const label: Phrasing = { type: 'text', value: `[^${node.label ?? node.identifier}]: ` };
    const [first, ...rest] = node.children as Content[];
    if (first?.type === 'paragraph') return [{ ...first, children: [label, ...first.children] }, ...rest];
    return [{ type: 'paragraph', children: [label] }, ...(first ? [first] : []), ...rest];
  });
}

/** Images as links to them (no chat message shows an inline image; the converters drop them). */
export function imagesAsLinks(root: Root): Root {
  return mapTree(root, (node) =>
    node.type === 'image'
      ? {
          type: 'link',
          url: node.url,
          title: null,
          children: [{ type: 'text', value: node.alt || node.url }],
        }
      : node,
  );
}

/**
 * Links the platform cannot open (a relative URL, a scheme it does not link) as their text and
 * the URL in brackets; just the text when it is the address itself (a mailto: link's).
 */
export function unusableLinksAsText(root: Root, usable: RegExp): Root {
  return mapTree(root, (node): Content | Content[] => {
    if (node.type !== 'link' || usable.test(node.url)) return node;
    const text = (node.children as Phrasing[]).map(inlineText).join('').trim();
    if (!text) return { type: 'text', value: node.url };
    const bare = node.url.replace(/^(?:mailto|tel):/i, '');
    if (text === node.url || text === bare) return node.children as Content[];
    return [...(node.children as Content[]), { type: 'text', value: ` (${node.url})` }];
  });
}

/**
 * For platforms that render Markdown themselves (Slack's `markdown_text`, Telegram's rich
 * messages): a block as the model wrote it when it is one, else the Chat SDK's stringifier
 * (a piece of a block that was split, a block whose references were resolved).
 */
export function markdownBlock(node: Content, doc: ReplyDoc): string {
  const start = node.position?.start.offset;
  const end = node.position?.end.offset;
  if (doc.originals.has(node) && start !== undefined && end !== undefined) {
    // From the start of its line: an indented code block's indentation is part of it.
    const line = doc.source.lastIndexOf('\n', start - 1) + 1;
    const from = /^[ \t]*$/.test(doc.source.slice(line, start)) ? line : start;
    return doc.source.slice(from, end).replace(/^\n+|\s+$/g, '');
  }
  return stringifyMarkdown(rootOf([node])).trim();
}

/** Every line of `text` as a quote line (`> `): a quote in these dialects is one line's mark. */
export function quoted(text: string): string {
  return text
    .split('\n')
    .map((line) => `> ${line}`)
    .join('\n');
}

/**
 * One block through an adapter's converter, except a quote: the converters mark only the first
 * line of each of its blocks, so the rest of a multi-line paragraph or a code block inside it
 * would fall out of the quote.
 */
export function converterBlock(converter: { fromAst(root: Root): string }): (node: Content) => string {
  const render = (node: Content): string =>
    node.type === 'blockquote'
      ? quoted(node.children.map(render).filter(Boolean).join('\n'))
      : converter.fromAst(rootOf([node])).trim();
  return render;
}

/**
 * A list as lines: `marker(ordered, number)` then each item's first block, its other blocks
 * and nested lists indented under the text; code blocks are not indented (their lines are
 * the code).
 */
export function listText(
  node: List,
  block: (node: Content) => string,
  marker: (ordered: boolean, n: number) => string,
  indent = '',
): string {
  const start = node.start ?? 1;
  const lines: string[] = [];
  node.children.forEach((item, i) => {
    const mark = marker(node.ordered === true, start + i);
    const pad = `${indent}${' '.repeat(Math.min(mark.length, 3) + 1)}`;
    let first = true;
    for (const child of item.children) {
      let text: string;
      if (child.type === 'list') text = listText(child, block, marker, pad);
      else if (child.type === 'code') text = block(child);
      else text = block(child).replaceAll('\n', `\n${pad}`);
      if (!text) continue;
      if (child.type === 'list') lines.push(text);
      else lines.push(first ? `${indent}${mark} ${text}` : child.type === 'code' ? text : `${pad}${text}`);
      first = false;
    }
    if (first) lines.push(`${indent}${mark}`);
  });
  return lines.join('\n');
}

/**
 * What the converter-based formats (Discord, Teams, Google Chat) share before their own
 * changes: references resolved, emphasis inside words kept as written, task boxes, footnotes
 * and images as text, headings as bold lines, links the platform cannot open as text.
 */
export function forConverter(root: Root, doc: ReplyDoc, usableLinks: RegExp): Root {
  const prepared = taskBoxesAsText(intrawordAsText(resolveReferences(root), doc));
  return unusableLinksAsText(imagesAsLinks(footnotesAsText(headingsAsBold(prepared))), usableLinks);
}
