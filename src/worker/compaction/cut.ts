import { type ChatMessage, isSummary } from '../../shared/messages.js';
import { messageTokens } from '../../shared/tokens.js';

export interface CutOptions {
  /** Newest messages always kept verbatim. */
  keepLast: number;
  /** Keep at least this many tokens of recent messages verbatim. */
  keepRecentTokens: number;
}

export interface Cut {
  /** The head of the history that the summary replaces, previous summary included. */
  replaced: ChatMessage[];
  previousSummary: ChatMessage | undefined;
  /** `replaced` without the previous summary: what the update prompt shows the model. */
  newMessages: ChatMessage[];
  kept: ChatMessage[];
}

/**
 * Where to cut: walk back from the newest message, keeping while either floor (count or
 * tokens) is not yet met; everything older is summarised. Cuts only between messages.
 * Returns undefined when there is nothing new to summarise.
 */
export function selectCut(history: ChatMessage[], opts: CutOptions): Cut | undefined {
  const previousSummary = history[0] && isSummary(history[0]) ? history[0] : undefined;
  const start = previousSummary ? 1 : 0;
  let cut = history.length;
  let keptTokens = 0;
  let keptCount = 0;
  while (cut > start && (keptCount < opts.keepLast || keptTokens < opts.keepRecentTokens)) {
    cut -= 1;
    keptCount += 1;
    keptTokens += messageTokens(history[cut]!);
  }
  if (cut <= start) return undefined;
  return {
    replaced: history.slice(0, cut),
    previousSummary,
    newMessages: history.slice(start, cut),
    kept: history.slice(cut),
  };
}

/**
 * History tokens at which a chat is queued for compaction: COMPACT_AT_TOKENS, or 80 % of the
 * budget a turn had for messages once the system prompt was paid for, whichever is lower —
 * so compaction starts before the hard cut has to drop anything (a long operator prompt
 * leaves much less than MAX_INPUT_TOKENS for history).
 */
export function compactionThreshold(compactAtTokens: number, messageBudget: number): number {
  return Math.max(1, Math.min(compactAtTokens, Math.floor(0.8 * messageBudget)));
}
