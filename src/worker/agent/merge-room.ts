import type { ModelMessage } from 'ai';
import { countTextTokens } from '../../shared/tokens.js';

/**
 * What is left of MAX_INPUT_TOKENS for messages merged into a running turn. The turn's first
 * request is assembled within the budget less the reserve; every later request carries that
 * input plus the step responses so far (tool calls and results) plus earlier merges, so a
 * merge takes only what remains and the rest of the arrivals wait for the next turn.
 */
export interface MergeRoom {
  /** Tokens a merge may add to the next request, given the step responses so far. */
  left(responses: readonly ModelMessage[]): number;
  /** Record tokens merged. */
  take(tokens: number): void;
  /**
   * The turn's input was replaced (a context switch: chat_context_new or chat_context_load)
   * by one of `assembledTokens`: later requests carry it in place of the input counted so far.
   */
  rebase(assembledTokens: number): void;
}

export function createMergeRoom(maxInputTokens: number, assembledTokens: number): MergeRoom {
  let input = assembledTokens;
  let merged = 0;
  // Step responses only grow (the SDK appends each step's own; merges are not among them):
  // count each one once, not per merge.
  let counted = 0;
  let countedTokens = 0;
  return {
    left: (responses) => {
      countedTokens += responseTokens(responses.slice(counted));
      counted = responses.length;
      return maxInputTokens - input - merged - countedTokens;
    },
    take: (tokens) => {
      merged += tokens;
    },
    rebase: (tokens) => {
      input = tokens;
    },
  };
}

/**
 * Tokens of step responses, counted over their JSON: an over-estimate (keys and ids count
 * too), which errs on the side of merging less, never of crossing the limit.
 */
export function responseTokens(responses: readonly ModelMessage[]): number {
  let total = 0;
  for (const m of responses) {
    total += countTextTokens(typeof m.content === 'string' ? m.content : JSON.stringify(m.content));
  }
  return total;
}
