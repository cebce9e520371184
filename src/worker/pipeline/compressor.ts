import { type ChatMessage, isSummary } from '../../shared/messages.js';
import { modelView } from '../../shared/model-view.js';
import { messageTokens, viewTokens } from '../../shared/tokens.js';
import type { CompressionReport, CompressionResult, Compressor } from './types.js';

/**
 * The two context Compressors (DESIGN: "Compressors are pure and never throw"). A bad message
 * must cost the turn some context, never the turn itself, so every step degrades instead of
 * throwing and inputs are never mutated.
 */

/** The defaults' report. `overBudget` makes a forced keep (newest message, summary) visible without re-deriving it. */
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
  /** Tokens the model view adds to a message beyond its stored count (its context block). */
  overheadTokens?: (message: ChatMessage) => number;
  /**
   * A cut drops the oldest messages in multiples of this many (counted from the start of the
   * input after its summary): the turns between two steps start alike, and a provider's
   * prompt cache serves them (docs/prompt-caching.md). 1 (the default): the least cut.
   */
  cutStep?: number;
}

/** The worker records a `context.compressed` event only when the model sees less than was stored. */
export function shouldReport(report: CompressionReport): boolean {
  return report.keptCount < report.originalCount || report.truncatedCount > 0;
}

/**
 * Keeps the summary and the newest `keepLast` messages, each cut to `maxCharsPerMessage`
 * characters of text; the budget only reports. Its window slides one message per turn once a
 * chat is longer, so each turn's request no longer extends the previous one (no prompt-cache
 * reuse): for tests and small bots. Pure, never throws.
 */
export class SimpleCompressor implements Compressor {
  private readonly keepLast: number;
  private readonly maxChars: number;

  constructor(options: SimpleCompressorOptions) {
    // Bad config is a wiring bug: fail at startup rather than on every turn.
    this.keepLast = limit('keepLast', options.keepLast, 1);
    this.maxChars = limit('maxCharsPerMessage', options.maxCharsPerMessage, 0);
  }

  compress(messages: ChatMessage[], budget: number): BudgetResult {
    return guarded(messages, budget, safeTokens, () => {
      const { summary, rest } = splitSummary(messages);
      const tail = rest.slice(Math.max(0, rest.length - this.keepLast));
      const kept = summary ? [summary, ...tail] : tail;
      return kept.map((message) => truncate(message, this.maxChars));
    });
  }
}

/**
 * chatlane's default Compressor: walks back from the newest message while the budget lasts,
 * never splitting a message, and always keeps the summary and the newest message. Counts
 * each message as its `metadata.tokens` plus `overheadTokens` (the context block), text cut
 * to `maxCharsPerMessage`; a cut drops the oldest messages in steps of `cutStep`. Pure,
 * never throws (a bad message costs the turn some context, never the turn).
 */
export class TokenBudgetCompressor implements Compressor {
  private readonly maxChars: number;
  private readonly overhead: ((message: ChatMessage) => number) | undefined;
  private readonly cutStep: number;

  constructor(options: TokenBudgetCompressorOptions) {
    this.maxChars = limit('maxCharsPerMessage', options.maxCharsPerMessage, 0);
    this.overhead = options.overheadTokens;
    this.cutStep = limit('cutStep', options.cutStep ?? 1, 1);
  }

  compress(messages: ChatMessage[], budget: number): BudgetResult {
    const cost = (message: ChatMessage) => messageCost(message, this.overhead);
    return guarded(messages, budget, cost, () => {
      const { summary, rest } = splitSummary(messages);
      const cap = normalizeBudget(budget);
      const head = summary ? truncate(summary, this.maxChars) : undefined;
      // The summary stands for everything older than the window, so its tokens come first.
      let used = head ? cost(head.message) : 0;
      const kept: Truncated[] = [];
      // Walking back lazily means cut messages are never truncated or re-tokenized.
      for (let i = rest.length - 1; i >= 0; i--) {
        const item = truncate(rest[i]!, this.maxChars);
        const tokens = cost(item.message);
        // The newest message is kept regardless: the model must see what it answers.
        if (kept.length > 0 && used + tokens > cap) break;
        used += tokens;
        kept.push(item);
      }
      kept.reverse();
      // A cut only ever drops more (within the budget), up to the next step, the newest kept.
      const first = rest.length - kept.length;
      if (first > 0 && this.cutStep > 1) {
        const stepped = Math.min(Math.ceil(first / this.cutStep) * this.cutStep, rest.length - 1);
        kept.splice(0, stepped - first);
      }
      return head ? [head, ...kept] : kept;
    });
  }
}

interface Truncated {
  message: ChatMessage;
  truncated: boolean;
}

function guarded(
  messages: ChatMessage[],
  budget: number,
  cost: (message: ChatMessage) => number,
  run: () => Truncated[],
): BudgetResult {
  const input = Array.isArray(messages) ? messages : [];
  const sumTokens = (list: ChatMessage[]) => {
    let sum = 0;
    for (const message of list) sum += cost(message);
    return sum;
  };
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
 * The message as the model will get it (text parts capped at `maxChars` in total, tool calls
 * and files left alone), with the token count of exactly that view: the stored one when it
 * describes the view (the provider counted it so), else counted now.
 */
function truncate(message: ChatMessage, maxChars: number): Truncated {
  const view = modelView(message, maxChars);
  if (!view.truncated) return view;
  let tokens: number;
  try {
    tokens = viewTokens(message, maxChars);
  } catch {
    tokens = 0;
  }
  return {
    message: { ...view.message, metadata: { ...view.message.metadata, tokens, tokensMaxChars: maxChars } },
    truncated: true,
  };
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

/** A message's tokens as the model gets it: its stored count and the view's overhead. */
function messageCost(message: ChatMessage, overhead: ((message: ChatMessage) => number) | undefined): number {
  if (!overhead) return safeTokens(message);
  let extra: number;
  try {
    extra = overhead(message);
  } catch {
    extra = 0;
  }
  return safeTokens(message) + extra;
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
