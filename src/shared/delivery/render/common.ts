import { type Content, type Root, stringifyMarkdown } from 'chat';
import { isIntraword, mapTree, type Phrasing, type ReplyDoc, rootOf, sourceOf } from './markdown.js';

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
 * For platforms that render Markdown themselves (Slack's `markdown_text`, Telegram's rich
 * messages): a block as the model wrote it when it is one, else the Chat SDK's stringifier
 * (a piece of a block that was split, a block whose references were resolved).
 */
export function markdownBlock(node: Content, doc: ReplyDoc): string {
  if (doc.originals.has(node)) {
    const source = sourceOf(node, doc);
    if (source !== undefined) return source.trim();
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
