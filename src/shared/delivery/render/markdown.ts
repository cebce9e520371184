import { type Content, type Paragraph, parseMarkdown, type Root } from 'chat';

/**
 * A reply's Markdown as the renderers see it: the model's text, its tree (the Chat SDK's own
 * mdast parser, GFM included) and which top-level blocks are still the parser's, so a
 * Markdown-speaking platform can be sent the model's own characters for them.
 */
export interface ReplyDoc {
  readonly source: string;
  readonly root: Root;
  /** Top-level blocks as parsed: their source slice is exactly what they show. */
  readonly originals: WeakSet<Content>;
}

export type Phrasing = Paragraph['children'][number];
export type Parent = Extract<Content, { children: unknown[] }>;

export function parseReply(source: string): ReplyDoc {
  const root = parseMarkdown(source);
  return { source, root, originals: new WeakSet(root.children) };
}

/** The node's characters in the model's text; undefined when it has no position (built here). */
export function sourceOf(node: Content, doc: ReplyDoc): string | undefined {
  const start = node.position?.start.offset;
  const end = node.position?.end.offset;
  return start === undefined || end === undefined ? undefined : doc.source.slice(start, end);
}

const WORD = /[\p{L}\p{N}]/u;
/** Scripts written without spaces between words: emphasis next to their letters is not inside a word. */
const UNSPACED = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}]/u;
const inWord = (c: string) => WORD.test(c) && !UNSPACED.test(c);

/**
 * Emphasis written inside a word (`2*3*4`, `foo**bar**baz`): CommonMark reads `*` there as
 * emphasis, but platforms whose markers need a word boundary (WhatsApp, Google Chat) would
 * show the markers around nothing, and the model meant the characters (arithmetic, a glob).
 * Those renderers keep such a span as the model wrote it.
 */
export function isIntraword(node: Content, doc: ReplyDoc): boolean {
  const start = node.position?.start.offset;
  const end = node.position?.end.offset;
  if (start === undefined || end === undefined) return false;
  return inWord(doc.source.charAt(start - 1)) || inWord(doc.source.charAt(end));
}

export function rootOf(children: Content[]): Root {
  return { type: 'root', children };
}

export function hasChildren(node: Content | Root): node is Parent | Root {
  return Array.isArray((node as { children?: unknown }).children);
}

/**
 * Rebuilds `node` bottom-up with `visit` applied to every descendant (children first), keeping
 * each unchanged node the same object; `visit` returns the node, a replacement, several, or
 * none. Never mutates: the parsed tree stays what was parsed.
 */
export function mapTree<T extends Content | Root>(
  node: T,
  visit: (node: Content, parent: Content | Root) => Content | Content[] | null,
): T {
  if (!hasChildren(node)) return node;
  let changed = false;
  const children: Content[] = [];
  for (const child of node.children as Content[]) {
    const mapped = mapTree(child, visit);
    const out = visit(mapped, node);
    const list = out === null ? [] : Array.isArray(out) ? out : [out];
    if (mapped !== child || list.length !== 1 || list[0] !== child) changed = true;
    children.push(...list);
  }
  return changed ? ({ ...node, children } as T) : node;
}

/**
 * Reference-style links and images (`[text][ref]` + `[ref]: url`) as inline ones, and the
 * definitions dropped: a long reply is split into several messages, and a definition in one
 * would not reach a reference in another.
 */
export function resolveReferences(root: Root): Root {
  const definitions = new Map<string, { url: string; title?: string | null | undefined }>();
  for (const node of root.children) {
    if (node.type === 'definition') definitions.set(node.identifier, node);
  }
  if (definitions.size === 0) return root;
  return mapTree(root, (node) => {
    if (node.type === 'definition') return null;
    if (node.type === 'linkReference') {
      const def = definitions.get(node.identifier);
      return def ? { type: 'link', url: def.url, title: def.title ?? null, children: node.children } : node;
    }
    if (node.type === 'imageReference') {
      const def = definitions.get(node.identifier);
      return def ? { type: 'image', url: def.url, title: def.title ?? null, alt: node.alt ?? '' } : node;
    }
    return node;
  });
}

/** Text a person reads in an inline node (the offsets the inline splitter cuts at). */
export function inlineText(node: Phrasing): string {
  switch (node.type) {
    case 'text':
    case 'inlineCode':
    case 'html':
      return node.value;
    case 'break':
      return '\n';
    case 'image':
      return node.alt ?? '';
    default:
      return hasChildren(node) ? (node.children as Phrasing[]).map(inlineText).join('') : '';
  }
}
