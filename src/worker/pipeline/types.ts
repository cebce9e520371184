import type { ModelMessage, SystemModelMessage } from 'ai';
import type { ChatMessage } from '../../shared/messages.js';
import type { InboxEntry, TurnInput, TurnReads } from '../../shared/store/chat-store.js';
import type { ChatToolName } from './chat-tool-names.js';

/**
 * The context pipeline of one turn (DESIGN §6): Provider → Compressor → Assembler.
 * Stages speak `ChatMessage` (UIMessage); provider formats appear only in the Assembler's
 * output.
 */

export interface ProviderResult {
  /** History window, oldest first; a summary, if any, first. Every message has metadata.tokens. */
  history: ChatMessage[];
  /** Pending inbox messages this turn will answer, oldest first, with their stream ids. */
  pending: InboxEntry[];
  /** Total messages in the stored history (the window may be shorter). */
  historyTotal: number;
  /** Entries in the chat's archive and archived contexts: which tools can act (chat-tools.ts). */
  archived: number;
  contexts: number;
  /** The chat's memory document, if any. */
  memory?: string | undefined;
}

/**
 * Decides what a turn reads and makes the turn's input of it. The read itself comes with the
 * turn's lease (acquire.lua reads `reads` in the same round trip and hands it to `load`);
 * `load` without one reads anew (a turn retried after a compaction).
 */
export interface Provider {
  readonly reads: TurnReads;
  load(chatKey: string, read?: TurnInput): Promise<ProviderResult>;
}

export interface CompressionReport {
  originalCount: number;
  keptCount: number;
  originalTokens: number;
  keptTokens: number;
  budget: number;
  truncatedCount: number;
}

export interface CompressionResult {
  messages: ChatMessage[];
  report: CompressionReport;
}

/**
 * Contract: pure and never throws. The output is a suffix of the input (plus the leading
 * summary when the input starts with one), in input order, messages never split; text parts
 * may be truncated. An empty input gives an empty output.
 */
export interface Compressor {
  compress(messages: ChatMessage[], budget: number): CompressionResult;
}

/**
 * What the system prompt says about the chat: only what stays the same from turn to turn
 * unless the chat changes (the clock and the sender ride on each user message instead).
 */
export interface RuntimeContext {
  chatKey: string;
  channel?: string;
  chatId?: string;
  /** The chat's memory document, if it has one (bounded by MEMORY_MAX_TOKENS). */
  memory?: string;
  /**
   * chatlane's tools this turn offers (chat-tools.ts): the prompt's guidance names only these.
   * Absent: all of them (an assembler used outside a turn).
   */
  offered?: readonly ChatToolName[];
  /**
   * The turn's history starts with a summary (the Compressor always keeps it): the output
   * rules then say how to read the summary header, and only then.
   */
  summarized?: boolean;
}

export interface AssembleInput {
  context: RuntimeContext;
  messages: ChatMessage[];
  /**
   * How many of `messages`, from the start, are stored history (the rest are this turn's):
   * where the history's cache point goes. Absent: all of them.
   */
  historyCount?: number;
  /** The budget guard: the assembled input is above 90 % of MAX_INPUT_TOKENS. */
  nearlyFull?: boolean;
}

export interface Assembled {
  /** The static part (with its cache point), then the chat's part. */
  system: SystemModelMessage[];
  messages: ModelMessage[];
}

export interface Assembler {
  assemble(input: AssembleInput): Promise<Assembled>;
}
