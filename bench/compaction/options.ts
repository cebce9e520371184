import type { Target } from '../lib/util.js';

/**
 * Compaction (issue 3), two measurements:
 *
 * 1. Tokens the model receives per turn over a 500-message conversation with compaction on,
 *    with the hard cut only (compaction off) and unbounded — one chat, one user message per
 *    turn, every turn run to completion (`runTurn`) before the next message arrives.
 * 2. Turn latency of the real turn worker while the real compaction worker summarises the
 *    same chats (same process), against compaction off.
 */

export interface CompactionOptions {
  runs: number;
  /** Part 1: user messages (= turns) in the conversation. */
  conversationTurns: number;
  /** Tokens of text in every user message (gpt-tokenizer). */
  userMessageTokens: number;
  maxInputTokens: number;
  keepLastMessages: number;
  /** MAX_INPUT_TOKENS of the unbounded mode. */
  unboundedMaxInputTokens: number;
  /** HISTORY_WINDOW_MESSAGES of the unbounded mode: at least the whole conversation. */
  unboundedWindowMessages: number;
  /** Tokens of the mock summary text. */
  summaryTokens: number;
  /** Part 2. */
  chats: number;
  seedMessages: number;
  messagesPerChat: number;
  concurrency: number;
  compactionConcurrency: number;
  summariserLatencyMs: number;
  turnModelLatencyMs: number;
  /** Part 2 warm-up before run 1 (both modes, discarded): chats × messages. */
  warmupChats: number;
  warmupMessages: number;
  timeoutMs: number;
}

export const COMPACTION_DEFAULTS: CompactionOptions = {
  runs: 3,
  conversationTurns: 500,
  userMessageTokens: 40,
  maxInputTokens: 4000,
  keepLastMessages: 10,
  unboundedMaxInputTokens: 10_000_000,
  unboundedWindowMessages: 2000,
  summaryTokens: 150,
  chats: 200,
  seedMessages: 80,
  messagesPerChat: 5,
  concurrency: 32,
  compactionConcurrency: 4,
  summariserLatencyMs: 50,
  turnModelLatencyMs: 5,
  warmupChats: 32,
  warmupMessages: 2,
  timeoutMs: 300_000,
};

export const LATENCY_TARGET: Target = {
  metric: 'ratio = turn latency with compaction running ÷ with compaction off (p50 and p99 each)',
  comparator: '<=',
  value: 1.1,
};

export const LLM_ENV = {
  // Satisfies requireModel only; both models are replaced by in-process mocks.
  LLM_BASE_URL: 'http://127.0.0.1:9/v1',
  LLM_MODEL: 'bench-echo',
};
