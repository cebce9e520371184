import { countTokens } from './bpe-count.js';
import { type ChatMessage, messageTokenText } from './messages.js';
import { modelView, textChars } from './model-view.js';

/**
 * Token counting that no input can make slow.
 *
 * The counts are gpt-tokenizer's (o200k_base, special-token text such as `<|endoftext|>` as
 * plain text), computed by bpe-count.ts with a fraction of its memory. Byte-pair merge is
 * quadratic in the length of one pre-token, and a run without spaces is one pre-token: 100 KB of `a` took 7 s and froze the worker. So text is
 * handed to the tokenizer in slices of at most TOKENIZER_SLICE_CHARS, which makes a count
 * O(length × slice) — linear. A slice ends just before a space that follows a non-space
 * character wherever the second half of its window has one: the tokenizer's pre-tokenizer
 * always starts a new piece there and BPE never merges across pieces, so ordinary text
 * counts exactly as it would whole. Only a run of more than half a slice without such a
 * space is cut hard. BPE is not monotonic under such a cut: the slices may count fewer
 * tokens than the whole — never more than one per cut in a search over ~35,000 periodic
 * and random strings of 1–4 symbols (e.g. ` \t` repeated) — so each hard cut adds
 * HARD_CUT_MARGIN tokens, twice the worst seen, and with it no string of that search
 * counted below its whole count (test/unit/tokens.test.ts checks both directions). This is
 * measured, not proven: BPE admits contrived merge tables where a cut costs more.
 *
 * Counts describe what a model receives: a message is counted in its model view (text
 * parts cut to MAX_CHARS_PER_MESSAGE, see model-view.ts), so a count costs at most that
 * many characters of text plus the message's tool parts, and a budget built from counts
 * covers every character that is sent.
 */

/** Longest string handed to the tokenizer in one call. */
export const TOKENIZER_SLICE_CHARS = 128;
/**
 * Async counting returns to the event loop after this many UTF-8 bytes or TOKENIZER_YIELD_MS,
 * whichever comes first. The byte bound is the testable one (a slice costs about its bytes:
 * ~1–2.5 µs per byte for the slowest shapes here, docs/benchmarks.md "Token counting on
 * hostile text"); the time bound catches a slow machine or a slower shape. One stretch is at most that plus one slice.
 */
export const TOKENIZER_YIELD_BYTES = 1024;
export const TOKENIZER_YIELD_MS = 1;

/** Tokens added per hard cut: see the module comment. */
export const HARD_CUT_MARGIN = 2;

/** Fixed per-message overhead (role, separators) as OpenAI-style chat formats count it. */
const MESSAGE_OVERHEAD = 4;

const isSpace = (code: number) => code === 0x20 || (code >= 0x09 && code <= 0x0d);

/** End of the slice that starts at `start`: see the module comment for where it cuts. */
function sliceEnd(text: string, start: number): number {
  const end = start + TOKENIZER_SLICE_CHARS;
  if (end >= text.length) return text.length;
  const floor = start + (TOKENIZER_SLICE_CHARS >> 1);
  for (let i = end; i > floor; i--) if (isSoftCut(text, i)) return i;
  // A hard cut never separates the halves of a surrogate pair.
  const last = text.charCodeAt(end - 1);
  return last >= 0xd800 && last <= 0xdbff ? end - 1 : end;
}

/** Before a space that follows a non-space: a piece boundary of the tokenizer. */
function isSoftCut(text: string, i: number): boolean {
  return text.charCodeAt(i) === 0x20 && !isSpace(text.charCodeAt(i - 1));
}

function isHardCut(text: string, end: number): boolean {
  return end < text.length && !isSoftCut(text, end);
}

/** Tokens of `text`, counted slice by slice (linear in its length). */
export function countTextTokens(text: string): number {
  if (text.length <= TOKENIZER_SLICE_CHARS) return countTokens(text);
  let total = 0;
  for (let start = 0; start < text.length; ) {
    const end = sliceEnd(text, start);
    total += countTokens(text.slice(start, end)) + (isHardCut(text, end) ? HARD_CUT_MARGIN : 0);
    start = end;
  }
  return total;
}

const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The same count as `countTextTokens`, returning to the event loop between stretches of work (see above). */
export async function countTextTokensAsync(text: string): Promise<number> {
  if (text.length <= TOKENIZER_SLICE_CHARS) return countTokens(text);
  let total = 0;
  let sinceYield = 0;
  let since = performance.now();
  for (let start = 0; start < text.length; ) {
    if (sinceYield >= TOKENIZER_YIELD_BYTES || performance.now() - since >= TOKENIZER_YIELD_MS) {
      await nextTick();
      sinceYield = 0;
      since = performance.now();
    }
    const end = sliceEnd(text, start);
    const slice = text.slice(start, end);
    total += countTokens(slice) + (isHardCut(text, end) ? HARD_CUT_MARGIN : 0);
    sinceYield += Buffer.byteLength(slice, 'utf8');
    start = end;
  }
  return total;
}

/** The stored count, or the whole message counted now (synchronously). */
export function messageTokens(message: ChatMessage): number {
  const cached = message.metadata?.tokens;
  if (typeof cached === 'number') return cached;
  return countTextTokens(messageTokenText(message)) + MESSAGE_OVERHEAD;
}

/**
 * Does the stored count describe this message's model view under `maxChars`? A count made
 * without a cut (`tokensMaxChars` unset) covers any cap the text fits in; a cut count only
 * the same cap.
 */
export function hasTokensFor(message: ChatMessage, maxChars: number): boolean {
  const { tokens, tokensMaxChars } = message.metadata ?? {};
  if (typeof tokens !== 'number' || !Number.isFinite(tokens) || tokens < 0) return false;
  if (tokensMaxChars !== undefined && tokensMaxChars === maxChars) return true;
  const chars = textChars(message);
  return chars <= maxChars && chars <= (tokensMaxChars ?? Number.POSITIVE_INFINITY);
}

/** Tokens of `modelView(message, maxChars)`: the stored count when it describes that view, else counted now. */
export function viewTokens(message: ChatMessage, maxChars: number): number {
  if (hasTokensFor(message, maxChars)) return message.metadata.tokens as number;
  const { message: view } = modelView(message, maxChars);
  return countTextTokens(messageTokenText(view)) + MESSAGE_OVERHEAD;
}

/**
 * The message with `metadata.tokens` = tokens of its model view under `maxChars`, counted
 * once (when it is committed or first read) and stored, so later turns never re-tokenize
 * old history. Yields to the event loop while counting long text.
 */
export async function withTokens(message: ChatMessage, maxChars: number): Promise<ChatMessage> {
  if (hasTokensFor(message, maxChars)) return message;
  const { message: view, truncated } = modelView(message, maxChars);
  const tokens = (await countTextTokensAsync(messageTokenText(view))) + MESSAGE_OVERHEAD;
  const metadata = { ...message.metadata, tokens };
  // Unset = the count covers the whole message (also what a count before caps meant).
  if (truncated) metadata.tokensMaxChars = maxChars;
  else delete metadata.tokensMaxChars;
  return { ...message, metadata };
}
