import type { Adapter, AdapterPostableMessage, Content, Root } from 'chat';
import { parseReply, type ReplyDoc } from './markdown.js';
import { splitBlocks } from './split.js';

/**
 * THE ONE PLACE A REPLY BECOMES PLATFORM MESSAGES. Every chat platform's outbox item goes
 * through `renderReply` with the platform's `ReplyFormat` (one module per dialect beside this
 * file, chosen by the platform module's `replies()`): the model's Markdown is parsed once
 * (the Chat SDK's mdast parser), the format adjusts the tree to what its platform can show,
 * the blocks are split to the platform's limit (./split.ts), and each message's text is
 * rendered block by block. What the adapter then posts is exactly that text: a format hands
 * the adapter either its own text (`{ raw }`) or Markdown the platform renders itself
 * (`{ markdown }`), never something the adapter converts and cuts again.
 */

/** One message of a reply. */
export interface ReplyPart {
  /** What the platform receives as the message's text. */
  readonly text: string;
  /** The adapter's input for it. */
  readonly message: AdapterPostableMessage;
}

/** A reply as the messages a platform gets, in order. */
export interface SplitReply {
  /**
   * The format's id: a partly delivered reply's cursor keeps it, so the rest is sent from the
   * same split. A change to a format's rules changes its id.
   */
  readonly format: string;
  readonly parts: readonly ReplyPart[];
}

export interface ReplyFormat {
  readonly id: string;
  /** The most one message may hold, in `measure`'s unit. */
  readonly limit: number;
  /** A text's size as the platform counts it against `limit` (default: UTF-16 code units). */
  measure?(text: string): number;
  /** The tree as this platform can show it (tables as text, headings as bold lines ...). Must not throw. */
  prepare?(root: Root, doc: ReplyDoc): Root;
  /**
   * One top-level block's text, trimmed; '' when it shows nothing. A message is its blocks'
   * texts joined by a blank line, so its size is the sum of theirs and the gaps.
   */
  block(node: Content, doc: ReplyDoc): string;
  /** What the adapter posts for a message's text. */
  message(text: string): AdapterPostableMessage;
}

/**
 * A platform's reply formats (its module's `replies()`): the one a new reply is split with,
 * every one a partly delivered reply may have begun with, and how one message is posted.
 */
export interface PlatformReplies {
  readonly formats: readonly ReplyFormat[];
  /** The format for a reply not begun yet; `adapter` tells what the platform takes now. */
  choose(adapter: Adapter): ReplyFormat;
  /** Posts one message (default: `adapter.postMessage(threadId, part.message)`). May throw (the adapter's errors). */
  post?(adapter: Adapter, threadId: string, part: ReplyPart): Promise<void>;
}

/** A platform with one format. */
export function oneFormat(format: ReplyFormat): PlatformReplies {
  return { formats: [format], choose: () => format };
}

const utf16 = (text: string) => text.length;
const GAP = '\n\n';

export function renderReply(text: string, format: ReplyFormat): SplitReply {
  const doc = parseReply(text);
  const root = format.prepare ? format.prepare(doc.root, doc) : doc.root;
  const measure = format.measure ?? utf16;
  const texts = new WeakMap<Content, string>();
  const blockText = (node: Content): string => {
    let out = texts.get(node);
    if (out === undefined) {
      out = format.block(node, doc);
      texts.set(node, out);
    }
    return out;
  };
  const groups = splitBlocks(root.children, {
    size: (node) => {
      const out = blockText(node);
      return out ? measure(out) : 0;
    },
    limit: format.limit,
    gap: measure(GAP),
  });
  const parts = groups
    .map((blocks) => blocks.map(blockText).filter(Boolean).join(GAP))
    .filter(Boolean)
    .map((out) => ({ text: out, message: format.message(out) }));
  if (parts.length === 0) {
    // Nothing the format shows (a lone link definition, a comment): the text as written.
    const plain = format.block({ type: 'paragraph', children: [{ type: 'text', value: text.trim() }] }, doc);
    parts.push({ text: plain, message: format.message(plain) });
  }
  return { format: format.id, parts };
}
