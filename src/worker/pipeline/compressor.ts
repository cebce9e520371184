import { type ChatMessage, isSummary } from '../../shared/messages.js';
import { messageTokens } from '../../shared/tokens.js';
import type { CompressionReport, CompressionResult, Compressor } from './types.js';

/**
 * The two context Compressors (DESIGN: "Compressors are pure and never throw"). A bad message
 * must cost the turn some context, never the turn itself, so every step degrades instead of
 * throwing and inputs are never mutated.
 */

/** `overBudget` makes a forced keep (newest message, summary) visible without re-deriving it. */
export interface BudgetReport extends CompressionReport {
  overBudget: boolean;
}

export interface BudgetResult extends CompressionResult {
  report: BudgetReport;
}

export interface SimpleCompressorOptions {
  /** Messages kept after the leading summary; at least 1 so the model sees what it answers. */
  keepLast: number;
  /** Cap on the text-part characters of one message (all its text parts together). */
  maxCharsPerMessage: number;
}

export interface TokenBudgetCompressorOptions {
  maxCharsPerMessage: number;
}

/** The worker records a `context.compressed` event only when the model sees less than was stored. */
export function shouldReport(report: CompressionReport): boolean {
  return report.keptCount < report.originalCount || report.truncatedCount > 0;
}

export class SimpleCompressor implements Compressor {
  private readonly keepLast: number;
  private readonly maxChars: number;

  constructor(options: SimpleCompressorOptions) {
    // Bad config is a wiring bug: fail at startup rather than on every turn.
    this.keepLast = limit('keepLast', options.keepLast, 1);
    this.maxChars = limit('maxCharsPerMessage', options.maxCharsPerMessage, 0);
  }

  compress(messages: ChatMessage[], budget: number): BudgetResult {
    return guarded(messages, budget, () => {
      const { summary, rest } = splitSummary(messages);
      const tail = rest.slice(Math.max(0, rest.length - this.keepLast));
      const kept = summary ? [summary, ...tail] : tail;
      return kept.map((message) => truncate(message, this.maxChars));
    });
  }
}

export class TokenBudgetCompressor implements Compressor {
  private readonly maxChars: number;

  constructor(options: TokenBudgetCompressorOptions) {
    this.maxChars = limit('maxCharsPerMessage', options.maxCharsPerMessage, 0);
  }

  compress(messages: ChatMessage[], budget: number): BudgetResult {
    return guarded(messages, budget, () => {
      const { summary, rest } = splitSummary(messages);
      const cap = normalizeBudget(budget);
      const head = summary ? truncate(summary, this.maxChars) : undefined;
      // The summary stands for everything older than the window, so its tokens come first.
      let used = head ? safeTokens(head.message) : 0;
      const kept: Truncated[] = [];
      // Walking back lazily means cut messages are never truncated or re-tokenized.
      for (let i = rest.length - 1; i >= 0; i--) {
        const item = truncate(rest[i]!, this.maxChars);
        const tokens = safeTokens(item.message);
        // The newest message is kept regardless: the model must see what it answers.
        if (kept.length > 0 && used + tokens > cap) break;
        used += tokens;
        kept.push(item);
      }
      kept.reverse();
      return head ? [head, ...kept] : kept;
    });
  }
}

interface Truncated {
  message: ChatMessage;
  truncated: boolean;
}

function guarded(messages: ChatMessage[], budget: number, run: () => Truncated[]): BudgetResult {
  const input = Array.isArray(messages) ? messages : [];
  const originalTokens = sumTokens(input);
  let kept: Truncated[];
  try {
    kept = run();
  } catch {
    // Unreachable by design; passing the history through beats failing the turn.
    kept = input.map((message) => ({ message, truncated: false }));
  }
  const out = kept.map((item) => item.message);
  const keptTokens = sumTokens(out);
  const reportedBudget = normalizeBudget(budget);
  return {
    messages: out,
    report: {
      originalCount: input.length,
      keptCount: out.length,
      originalTokens,
      keptTokens,
      budget: reportedBudget,
      truncatedCount: kept.filter((item) => item.truncated).length,
      overBudget: keptTokens > reportedBudget,
    },
  };
}

function splitSummary(messages: ChatMessage[]): { summary?: ChatMessage; rest: ChatMessage[] } {
  const first = messages[0];
  if (first && isSummary(first)) return { summary: first, rest: messages.slice(1) };
  return { rest: messages };
}

/**
 * Caps the text parts of a message at `maxChars` in total, leaving other parts (tool calls,
 * files) alone. A truncated message is a copy whose cached token count is recomputed, since
 * the stored one described the longer text.
 */
function truncate(message: ChatMessage, maxChars: number): Truncated {
  if (!Array.isArray(message.parts) || maxChars === Number.POSITIVE_INFINITY) {
    return { message, truncated: false };
  }
  let remaining = maxChars;
  let changed = false;
  const parts = message.parts.map((part) => {
    if (part?.type !== 'text' || typeof part.text !== 'string') return part;
    if (part.text.length <= remaining) {
      remaining -= part.text.length;
      return part;
    }
    const kept = part.text.slice(0, safeCut(part.text, remaining));
    remaining = 0;
    changed = true;
    return { ...part, text: `${kept}… [truncated ${part.text.length - kept.length} chars]` };
  });
  if (!changed) return { message, truncated: false };
  const draft: ChatMessage = { ...message, parts, metadata: { ...message.metadata, tokens: undefined } };
  return {
    message: { ...draft, metadata: { ...draft.metadata, tokens: safeTokens(draft) } },
    truncated: true,
  };
}

/** Never ends a cut on the first half of a surrogate pair, which would leave invalid UTF-16. */
function safeCut(text: string, at: number): number {
  const code = text.charCodeAt(at - 1);
  return at > 0 && code >= 0xd800 && code <= 0xdbff ? at - 1 : at;
}

function safeTokens(message: ChatMessage): number {
  try {
    const tokens = messageTokens(message);
    if (Number.isFinite(tokens) && tokens >= 0) return tokens;
    // A corrupt cached count must not poison the sum; count the content instead.
    return messageTokens({ ...message, metadata: { ...message.metadata, tokens: undefined } });
  } catch {
    // Parts too malformed to tokenize: count the message as free rather than fail the turn.
    return 0;
  }
}

function sumTokens(messages: ChatMessage[]): number {
  let sum = 0;
  for (const message of messages) sum += safeTokens(message);
  return sum;
}

function normalizeBudget(budget: number): number {
  return typeof budget === 'number' && budget >= 0 ? budget : 0;
}

function limit(name: string, value: number, min: number): number {
  if (value === Number.POSITIVE_INFINITY) return value;
  if (!Number.isInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer >= ${min} or Infinity, got ${value}`);
  }
  return value;
}
