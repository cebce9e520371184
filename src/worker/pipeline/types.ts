import type { ModelMessage, SystemModelMessage } from 'ai';
import type { ChatMessage } from '../../shared/messages.js';
import type { InboxEntry, TurnInput, TurnReads } from '../../shared/store/chat-store.js';
import type { ChatToolName } from './chat-tool-names.js';

/**
 * The context pipeline of one turn (DESIGN §6): Provider → Compressor → Assembler. Each stage
 * is an interface a program may wrap or replace (stages.ts). Stages speak `ChatMessage` (an AI
 * SDK UIMessage); provider formats appear only in the Assembler's output.
 *
 * The request they make must keep the prompt-cache layout (docs/prompt-caching.md): tools,
 * then the system prompt (its static part first, then the chat's part), then the history,
 * then this turn's messages. Between two turns of a chat the earlier request is a byte
 * prefix of the later one, so whatever is new in a turn goes after the history: on this
 * turn's messages, which are stored with it and read the same in every later request.
 */

/** What a Provider gives a turn. */
export interface ProviderResult {
  /**
   * The history window, oldest first, a summary (if any) first: the stored messages as they
   * are, since the previous turn's request showed them so (changing one breaks the prompt
   * cache from that message on, and is never stored). Every message has `metadata.tokens`.
   */
  history: ChatMessage[];
  /**
   * The pending inbox messages this turn answers, oldest first, each with its stream id
   * (which the commit consumes: keep it). These are the turn's own messages, after the
   * history: a Provider may add to them what the model should read for them (`withRetrieved`
   * adds retrieved documents to the newest one). They are stored as given when the turn
   * commits, so later turns read them the same. A message whose parts changed must not keep
   * its old `metadata.tokens` (`withRetrieved` drops it): the turn counts a message without one.
   */
  pending: InboxEntry[];
  /** Total messages in the stored history (the window may be shorter). */
  historyTotal: number;
  /** Entries in the chat's archive and archived contexts: which tools can act (chat-tools.ts). */
  archived: number;
  contexts: number;
  /** The chat's memory document, if any. */
  memory?: string | undefined;
  /**
   * The operator's instructions for this chat, if any: the chat's part of the system prompt
   * (`instructions` given in code as a function of the chat puts them here).
   */
  instructions?: string | undefined;
}

/**
 * Decides what a turn reads and makes the turn's input of it (the default: `RedisProvider`).
 *
 * The read itself comes with the turn's lease: the lease script reads what `reads` says in
 * the same round trip and hands it to `load` as `read`; `load` without one reads anew (a turn
 * retried after a compaction). A Provider that wraps another keeps that one's `reads` and
 * hands `read` to it unchanged: the read is shaped by `reads`, and only the wrapped Provider
 * knows how to make an input of it.
 *
 * `load` may throw (a Redis or retrieval failure): the turn's attempt then fails and its job
 * retries it, as for any failure that is not the message's. It is called again on each
 * attempt, and on the retry after a context overflow.
 */
export interface Provider {
  /** How much the lease reads for `load`: the newest `windowMessages` of history, `maxPending` inbox entries. */
  readonly reads: TurnReads;
  load(chatKey: string, read?: TurnInput): Promise<ProviderResult>;
}

/**
 * What a Compressor did. The turn records it as a `context.compressed` event when the model
 * sees less than was stored, and plans with `keptTokens`: the nearly-full line and the room
 * left for messages merged mid-turn.
 */
export interface CompressionReport {
  originalCount: number;
  keptCount: number;
  originalTokens: number;
  /** Tokens of `messages` as the model gets them (each message's `metadata.tokens` and its context block). */
  keptTokens: number;
  budget: number;
  /** Messages whose text was cut (MAX_CHARS_PER_MESSAGE). */
  truncatedCount: number;
}

export interface CompressionResult {
  messages: ChatMessage[];
  report: CompressionReport;
}

/**
 * Fits a turn's messages into its token budget (the default: `TokenBudgetCompressor`).
 *
 * Contract: pure and never throws. The input is the history, then this turn's messages; the
 * budget is MAX_INPUT_TOKENS less the system prompt, the tool definitions and a reserve. The
 * output is a suffix of the input (plus the leading summary when the input starts with one),
 * in input order, messages never split; text parts may be truncated. The newest message is
 * kept whatever the budget (the model must see what it answers); the rest stay within it.
 * An empty input gives an empty output.
 *
 * Tokens are the ones the input carries (`metadata.tokens`, counted by chatlane's tokenizer
 * when a message is stored or first read, including what a Provider added), so what a stage
 * adds to a message costs older history, not the limit. A cut should move in steps, not one
 * message per turn, or each turn's request stops extending the previous one.
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
  /**
   * The operator's instructions for this chat (`instructions` given as a function of the
   * chat), computed for each turn: they belong in the chat's part of the system prompt.
   */
  instructions?: string;
}

/** What an `instructions` function is told of the chat it writes instructions for. */
export interface InstructionsContext {
  chatKey: string;
  /** The chat's platform or channel (`telegram`, `slack`, an API caller's own), when known. */
  channel?: string;
  /** The chat's id on that platform, when known. */
  chatId?: string;
}

/**
 * The operator's instructions given in code, instead of SYSTEM_PROMPT_FILE's text.
 * - A string is the same for every chat: it goes into the static part of the system prompt,
 *   which every chat's requests share.
 * - A function of the chat is called on every turn (each attempt), and its text goes into the
 *   chat's part, after the static part. Return the same text for a chat from turn to turn: a
 *   change ends the cached prefix there. A throw fails the turn's attempt, and its job retries.
 */
export type Instructions = string | ChatInstructions;

/** Instructions that depend on the chat: see `Instructions`. */
export type ChatInstructions = (chat: InstructionsContext) => string | Promise<string>;

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

/**
 * Makes the model's request of a turn's context (the default: `DefaultAssembler`).
 *
 * Contract: the output keeps the prompt-cache layout. The system messages start with what is
 * the same for every chat and turn and end with what is the chat's; neither may hold what
 * changes from turn to turn (a clock, the newest sender): each stored message must read the
 * same in every request that carries it, and only this turn's messages come after the history.
 */
export interface Assembler {
  /**
   * Tokens of the system messages `assemble` returns for `context` (with `nearlyFull` false),
   * counted with chatlane's tokenizer (`countTextTokens`): the turn takes them off the budget
   * before the Compressor runs. The turn keeps `budgetLineTokens()` more aside for what
   * `nearlyFull` adds. Synchronous and must not throw.
   */
  systemTokens(context: RuntimeContext): number;
  /** The request's system messages and messages, in the Compressor's order. */
  assemble(input: AssembleInput): Promise<Assembled>;
  /**
   * Stored messages as the model sees them, exactly as `assemble` shows them in the history:
   * messages merged into a running turn are sent so, and the next turn's request must start
   * with this one, byte for byte.
   */
  toModel(messages: ChatMessage[]): Promise<ModelMessage[]>;
}
