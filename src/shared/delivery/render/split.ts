import { type Code, type Content, type List, tableToAscii } from 'chat';
import { inlineText, type Parent, type Phrasing } from './markdown.js';

/**
 * Splits a reply's blocks into messages of at most `limit` (in the platform's unit), in order,
 * losing nothing. Blocks are packed greedily, so a message ends at a paragraph (block)
 * boundary whenever the next block fits in a message of its own; a block too long for one is
 * cut at sentence boundaries, a sentence too long at word boundaries, a word too long between
 * graphemes, and its first piece fills the message before it where there is room.
 * Containers are cut between their children and each piece keeps its container: a code
 * block's pieces are code blocks of whole lines (never a fence left open), a list's are lists
 * numbered on, a table's are tables with the header row again, a quote's are quotes.
 *
 * A heading is not left at the end of a message when it fits with what it heads.
 *
 * The split is deterministic: the same text and limit give the same messages, which a partly
 * delivered reply relies on to resume at its next part.
 */
export interface SplitOptions {
  /** One block's size as the platform shows it; 0 when it shows nothing. */
  size(block: Content): number;
  limit: number;
  /** What separates two blocks of one message (a blank line). */
  gap: number;
}

export function splitBlocks(blocks: readonly Content[], opts: SplitOptions): Content[][] {
  const parts: Content[][] = [];
  const queue = [...blocks];
  let current: Content[] = [];
  let used = 0;
  while (queue.length > 0) {
    const block = queue.shift()!;
    const size = opts.size(block);
    if (size === 0) continue;
    const after = current.length > 0 ? used + opts.gap + size : size;
    if (after <= opts.limit) {
      current.push(block);
      used = after;
      continue;
    }
    if (size > opts.limit) {
      // Longer than a message: cut, its first piece filling this message where there is room.
      const whole: Fit = (n) => opts.size(n) <= opts.limit;
      const room = current.length > 0 ? opts.limit - used - opts.gap : 0;
      let pieces = room > 0 ? splitBlock(block, (n, k) => opts.size(n) <= (k === 0 ? room : opts.limit)) : [];
      if (pieces.length < 2 || opts.size(pieces[0]!) > room) pieces = splitBlock(block, whole);
      if (pieces.length > 1) {
        queue.unshift(...pieces);
        continue;
      }
      // Nothing smaller to cut it into (cannot happen for text: it ends at graphemes): alone.
      if (current.length > 0) parts.push(current);
      parts.push([block]);
      current = [];
      used = 0;
      continue;
    }
    // A heading goes on with what it heads.
    const last = current.at(-1);
    if (last && current.length > 1 && isHeading(last) && opts.size(last) + opts.gap + size <= opts.limit) {
      current.pop();
      parts.push(current);
      current = [last, block];
      used = opts.size(last) + opts.gap + size;
      continue;
    }
    if (current.length > 0) parts.push(current);
    current = [block];
    used = size;
  }
  if (current.length > 0) parts.push(current);
  return parts;
}

function isHeading(node: Content): boolean {
  return node.type === 'heading' || (node.data as { heading?: boolean } | undefined)?.heading === true;
}

/**
 * Whether a piece fits where it goes: `index` 0 is a block's first piece, which may have to fit
 * in what is left of the message before it; a container's pieces are measured wrapped.
 */
type Fit = (piece: Content, index: number) => boolean;

/**
 * `block` cut into pieces that fit (a piece that still does not, a single sentence, word or
 * line, is cut again, finer, when its turn comes). One piece or none: it cannot be cut.
 */
function splitBlock(block: Content, fits: Fit): Content[] {
  switch (block.type) {
    case 'paragraph':
    case 'heading':
      return splitInline(block, fits);
    case 'code':
    case 'html':
      return splitValue(block, fits);
    case 'list':
      return splitList(block, fits);
    case 'blockquote':
    case 'footnoteDefinition':
      return splitChildren(block, fits);
    case 'table': {
      const [header, ...rows] = block.children;
      const make = (i: number, j: number) => ({ ...block, children: [header!, ...rows.slice(i, j)] });
      if (header && rows.length > 1)
        return pack(rows.length, (i, j, k) => fits(make(i, j), k)).map(([i, j]) => make(i, j));
      // One row longer than a message: its text as a code block, cut by lines.
      return splitValue({ type: 'code', lang: null, meta: null, value: tableToAscii(block) }, fits);
    }
    default:
      return [block];
  }
}

/**
 * Ranges [i, j) over `count` units, in order, each the longest from its start that fits as
 * piece k (found by doubling, then bisecting: a few renders per piece, not one per unit); a
 * unit that does not fit alone is a range of its own.
 */
function pack(count: number, fits: (i: number, j: number, k: number) => boolean): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  let i = 0;
  while (i < count) {
    const k = ranges.length;
    let good = i + 1;
    if (fits(i, good, k)) {
      let step = 1;
      let bad = count + 1;
      while (good < count) {
        const next = Math.min(count, good + step);
        if (!fits(i, next, k)) {
          bad = next;
          break;
        }
        good = next;
        step *= 2;
      }
      while (bad - good > 1) {
        const mid = Math.floor((good + bad) / 2);
        if (mid <= count && fits(i, mid, k)) good = mid;
        else bad = mid;
      }
    }
    ranges.push([i, good]);
    i = good;
  }
  return ranges;
}

function splitChildren(node: Parent, fits: Fit): Content[] {
  const children = node.children as Content[];
  const wrap = (kids: Content[]) => ({ ...node, children: kids }) as Content;
  if (children.length > 1) {
    return pack(children.length, (i, j, k) => fits(wrap(children.slice(i, j)), k)).map(([i, j]) =>
      wrap(children.slice(i, j)),
    );
  }
  const [only] = children;
  return only ? splitBlock(only, (n, k) => fits(wrap([n]), k)).map((piece) => wrap([piece])) : [node];
}

/**
 * A list cut between its items (an ordered list's later pieces numbered on). A single item
 * too long keeps its bullet on its first piece; the rest of it follows as plain blocks.
 */
function splitList(list: List, fits: Fit): Content[] {
  const items = list.children;
  const piece = (i: number, j: number): List => ({
    ...list,
    ...(list.ordered && { start: (list.start ?? 1) + i }),
    children: items.slice(i, j),
  });
  if (items.length > 1)
    return pack(items.length, (i, j, k) => fits(piece(i, j), k)).map(([i, j]) => piece(i, j));
  const [item] = items;
  const [first, ...rest] = (item?.children ?? []) as Content[];
  if (!item || !first) return [list];
  const bulleted = (n: Content): List => ({
    ...list,
    children: [{ ...item, children: [n] as typeof item.children }],
  });
  if (rest.length > 0) return [bulleted(first), ...rest];
  const pieces = splitBlock(first, (n, k) => (k === 0 ? fits(bulleted(n), 0) : fits(n, k)));
  return pieces.length > 0 ? [bulleted(pieces[0]!), ...pieces.slice(1)] : [list];
}

/** A code block (or raw HTML) cut between lines; a line longer than a message between graphemes. */
function splitValue(node: Code | Extract<Content, { type: 'html' }>, fits: Fit): Content[] {
  const lines = node.value.split('\n');
  const units =
    lines.length > 1 ? lines.map((l, i) => (i < lines.length - 1 ? `${l}\n` : l)) : graphemes(node.value);
  if (units.length < 2) return [node];
  const make = (i: number, j: number) => ({ ...node, value: units.slice(i, j).join('').replace(/\n$/, '') });
  return pack(units.length, (i, j, k) => fits(make(i, j), k)).map(([i, j]) => make(i, j));
}

const sentences = new Intl.Segmenter(undefined, { granularity: 'sentence' });
const words = new Intl.Segmenter(undefined, { granularity: 'word' });
const graphemeSegmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

function graphemes(text: string): string[] {
  return Array.from(graphemeSegmenter.segment(text), (s) => s.segment);
}

type Level = 'sentence' | 'word' | 'grapheme';

/**
 * Where a run of inline content may be cut, as offsets into its text: sentence starts; word
 * starts after whitespace (and between two words of a script written without spaces); every
 * grapheme. Never inside a link, an image or inline code above the grapheme level.
 */
function boundaries(children: Phrasing[], level: Level): number[] {
  const text = children.map(inlineText).join('');
  const closed: Array<[number, number]> = [];
  let at = 0;
  const walk = (nodes: Phrasing[]) => {
    for (const node of nodes) {
      const len = inlineText(node).length;
      const atomic = node.type === 'image' || node.type === 'break';
      const whole = node.type === 'link' || node.type === 'inlineCode' || node.type === 'html';
      if (atomic || (whole && level !== 'grapheme')) closed.push([at, at + len]);
      else if ('children' in node) {
        walk(node.children as Phrasing[]);
        continue;
      }
      at += len;
    }
  };
  walk(children);
  const open = (offset: number) => closed.every(([s, e]) => offset <= s || offset >= e);
  const out: number[] = [];
  if (level === 'sentence') {
    for (const s of sentences.segment(text)) if (s.index > 0 && open(s.index)) out.push(s.index);
  } else if (level === 'word') {
    let previous: Intl.SegmentData | undefined;
    for (const s of words.segment(text)) {
      const afterSpace = s.index > 0 && /\s/u.test(text.charAt(s.index - 1)) && !/\s/u.test(s.segment);
      const between = previous?.isWordLike && s.isWordLike;
      if (s.index > 0 && (afterSpace || between) && open(s.index)) out.push(s.index);
      previous = s;
    }
  } else {
    for (const s of graphemeSegmenter.segment(text)) if (s.index > 0 && open(s.index)) out.push(s.index);
  }
  return out;
}

type InlineBlock = Extract<Content, { type: 'paragraph' | 'heading' }>;

/** A paragraph or heading cut at sentences, else words, else graphemes: pieces of the same kind. */
function splitInline(node: InlineBlock, fits: Fit): Content[] {
  const children = node.children as Phrasing[];
  const total = children.map(inlineText).join('').length;
  for (const level of ['sentence', 'word', 'grapheme'] as const) {
    const cuts = [0, ...boundaries(children, level), total];
    if (cuts.length < 3) continue;
    const make = (i: number, j: number) =>
      ({ ...node, children: trimEdges(sliceInline(children, cuts[i]!, cuts[j]!, total)) }) as Content;
    const ranges = pack(cuts.length - 1, (i, j, k) => fits(make(i, j), k));
    if (ranges.length > 1) return ranges.map(([i, j]) => make(i, j));
  }
  return [node];
}

/**
 * The inline content covering text offsets [from, to): whole nodes where they lie inside,
 * text (and, cut between graphemes, inline code) sliced, containers (strong, emphasis, link
 * ...) cloned around their sliced children, so every piece closes what it opens.
 */
function sliceInline(nodes: Phrasing[], from: number, to: number, end: number): Phrasing[] {
  const out: Phrasing[] = [];
  let at = 0;
  for (const node of nodes) {
    const len = inlineText(node).length;
    const start = at;
    at += len;
    if (len === 0) {
      if (start >= from && (start < to || to === end)) out.push(node);
      continue;
    }
    if (at <= from || start >= to) continue;
    if (start >= from && at <= to) {
      out.push(node);
      continue;
    }
    const a = Math.max(from, start) - start;
    const b = Math.min(to, at) - start;
    if (node.type === 'text' || node.type === 'inlineCode' || node.type === 'html') {
      out.push({ ...node, value: node.value.slice(a, b) });
    } else if ('children' in node) {
      const kids = sliceInline(node.children as Phrasing[], a, b, len);
      out.push({ ...node, children: kids } as Phrasing);
    } else {
      out.push(node);
    }
  }
  return out;
}

/** A piece's leading and trailing whitespace dropped (a cut falls after the space). */
function trimEdges(nodes: Phrasing[]): Phrasing[] {
  const edge = (list: Phrasing[], side: 'start' | 'end'): Phrasing[] => {
    const index = side === 'start' ? 0 : list.length - 1;
    const node = list[index];
    if (!node) return list;
    let next: Phrasing | undefined;
    if (node.type === 'text') {
      const value = side === 'start' ? node.value.trimStart() : node.value.trimEnd();
      next = value ? { ...node, value } : undefined;
    } else if ('children' in node && node.type !== 'link') {
      const kids = edge(node.children as Phrasing[], side);
      next = kids.length > 0 ? ({ ...node, children: kids } as Phrasing) : undefined;
    } else {
      return list;
    }
    const copy = [...list];
    if (next) copy[index] = next;
    else copy.splice(index, 1);
    return next ? copy : edge(copy, side);
  };
  return edge(edge(nodes, 'start'), 'end');
}
