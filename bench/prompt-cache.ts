import { type RecordedRequest, startMockLlm } from '../src/mock-llm/server.js';
import { type Config, loadConfig } from '../src/shared/config.js';
import { silentLogger } from '../src/shared/logger.js';
import { closeRedis, createRedis, waitReady } from '../src/shared/redis.js';
import { ChatStore } from '../src/shared/store/chat-store.js';
import { countTextTokens } from '../src/shared/tokens.js';
import { runTurn } from '../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../src/worker/turn/turn-deps.js';
import {
  adminRedis,
  deletePrefix,
  mean,
  meets,
  prng,
  progress,
  REDIS_URL,
  randomPrefix,
  round,
  sleep,
  type Target,
  userMessage,
} from './lib/util.js';

/**
 * Prompt caching (issue 20 §3): how much of each turn's model input a provider's prefix cache
 * can serve. Real turns (`runTurn` with the production wiring of turnDepsFromConfig) against
 * the project's mock model over HTTP, which records every request body and reports, as OpenAI
 * does, the input tokens its chat's previous request had as an identical prefix
 * (src/mock-llm/prompt-cache.ts). Rounds of one turn per chat start a second apart, so the
 * clock a request may carry differs from turn to turn as it does in a real chat.
 *
 * Per turn (all its model calls):
 * - cached share: cached input tokens ÷ input tokens (target ≥ 0.9 from turn 3 on);
 * - full-price input: input tokens not cached, against the least possible (each call's tokens
 *   beyond its previous call's: only what is new);
 * - byte prefix: of the previous turn's last request (tools → system → messages, as JSON),
 *   the share that is a byte-identical prefix of this turn's first request, and where the
 *   first difference falls.
 */

export interface PromptCacheOptions {
  chats: number;
  turns: number;
  /** Tokens of filler text in every user message. */
  userMessageTokens: number;
  /** HISTORY_WINDOW_MESSAGES of the long-chat mode (a window the conversation outgrows). */
  smallWindowMessages: number;
  /** Milliseconds between the starts of two rounds (one turn per chat each). */
  roundMs: number;
}

export const PROMPT_CACHE_DEFAULTS: PromptCacheOptions = {
  chats: 4,
  turns: 50,
  userMessageTokens: 40,
  smallWindowMessages: 40,
  roundMs: 1000,
};

export const CACHED_SHARE_TARGET: Target = {
  metric: 'cached share of input (cached input tokens ÷ input tokens), every turn from the third on',
  comparator: '>=',
  value: 0.9,
};

type Mode = 'defaults' | 'smallWindow';

interface TurnFigures {
  turn: number;
  requests: number;
  /** Message tokens as the mock counts them (`prompt_tokens`, `cached_tokens`). */
  inputTokens: number;
  cachedTokens: number;
  fullPrice: number;
  leastFullPrice: number;
  /** The same with the tool definitions' tokens, which providers bill as input too. */
  billed: { inputTokens: number; cachedTokens: number; fullPrice: number; leastFullPrice: number };
  /** Of the previous turn's last request, the byte share that prefixes this turn's first. */
  bytePrefixShare?: number;
  firstDifference?: 'tools' | 'system' | 'messages' | 'none';
}

const WORDS = (
  'the deploy window moved to friday because the database migration needs a quiet hour and ' +
  'support asked for a heads up before we switch traffic to the new region please confirm the ' +
  'rollback plan and who is on call while invoices are regenerated overnight'
).split(' ');

function userText(seed: number, words: number): string {
  const rand = prng(seed);
  return Array.from({ length: words }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(' ');
}

interface Body {
  tools?: unknown;
  messages: Array<{ role?: string }>;
}

function canonical(body: Body): { tools: string; messages: string[] } {
  return { tools: JSON.stringify(body.tools ?? []), messages: body.messages.map((m) => JSON.stringify(m)) };
}

/** Byte share of `before` that prefixes `after` (tools, then each message), and where they part. */
export function bytePrefix(
  before: Body,
  after: Body,
): { share: number; firstDifference: NonNullable<TurnFigures['firstDifference']> } {
  const a = canonical(before);
  const b = canonical(after);
  const total = a.tools.length + a.messages.reduce((s, m) => s + m.length, 0);
  if (a.tools !== b.tools) return { share: commonLength(a.tools, b.tools) / total, firstDifference: 'tools' };
  let same = a.tools.length;
  for (let i = 0; i < a.messages.length; i++) {
    const x = a.messages[i]!;
    const y = b.messages[i] ?? '';
    if (x !== y) {
      const where = before.messages[i]?.role === 'system' ? 'system' : 'messages';
      return { share: (same + commonLength(x, y)) / total, firstDifference: where };
    }
    same += x.length;
  }
  return { share: 1, firstDifference: 'none' };
}

function commonLength(x: string, y: string): number {
  const n = Math.min(x.length, y.length);
  let i = 0;
  while (i < n && x.charCodeAt(i) === y.charCodeAt(i)) i++;
  return i;
}

const toolTokenCounts = new Map<string, number>();

/** Tokens of the tool definitions (as JSON): counted once per distinct set. */
function toolTokens(tools: string): number {
  let n = toolTokenCounts.get(tools);
  if (n === undefined) {
    n = tools === '[]' ? 0 : countTextTokens(tools);
    toolTokenCounts.set(tools, n);
  }
  return n;
}

function figuresOf(turns: RecordedRequest[][]): TurnFigures[] {
  let previousInput = 0;
  let previousBilled = 0;
  let previousTools: string | undefined;
  return turns.map((requests, t) => {
    let inputTokens = 0;
    let cachedTokens = 0;
    let least = 0;
    const billed = { inputTokens: 0, cachedTokens: 0, fullPrice: 0, leastFullPrice: 0 };
    for (const r of requests) {
      inputTokens += r.promptTokens;
      cachedTokens += r.cachedTokens;
      least += Math.max(0, r.promptTokens - previousInput);
      previousInput = r.promptTokens;
      // Tools come first in what providers cache: the mock's cached messages imply the same tools.
      const tools = JSON.stringify((r.body as Body).tools ?? []);
      const input = r.promptTokens + toolTokens(tools);
      billed.inputTokens += input;
      billed.cachedTokens += r.cachedTokens + (tools === previousTools ? toolTokens(tools) : 0);
      billed.leastFullPrice += Math.max(0, input - previousBilled);
      previousBilled = input;
      previousTools = tools;
    }
    billed.fullPrice = billed.inputTokens - billed.cachedTokens;
    const figures: TurnFigures = {
      turn: t + 1,
      requests: requests.length,
      inputTokens,
      cachedTokens,
      fullPrice: inputTokens - cachedTokens,
      leastFullPrice: least,
      billed,
    };
    const before = turns[t - 1]?.at(-1);
    const first = requests[0];
    if (before && first) {
      const { share, firstDifference } = bytePrefix(before.body as Body, first.body as Body);
      figures.bytePrefixShare = share;
      figures.firstDifference = firstDifference;
    }
    return figures;
  });
}

interface Summary {
  cachedShareMean: number;
  cachedShareMin: number;
  turnsBelowTarget: number;
  fullPricePerTurn: number;
  leastFullPricePerTurn: number;
  fullPriceOverLeast: number;
}

type Figures = Pick<TurnFigures, 'inputTokens' | 'cachedTokens' | 'fullPrice' | 'leastFullPrice'>;

const share = (f: Figures) => (f.inputTokens === 0 ? 1 : f.cachedTokens / f.inputTokens);

function summary(turns: Figures[]): Summary {
  const fullPrice = mean(turns.map((f) => f.fullPrice));
  const least = mean(turns.map((f) => f.leastFullPrice));
  return {
    cachedShareMean: round(mean(turns.map(share)), 3),
    cachedShareMin: round(Math.min(...turns.map(share)), 3),
    turnsBelowTarget: turns.filter((f) => !meets(CACHED_SHARE_TARGET, share(f))).length,
    fullPricePerTurn: round(fullPrice, 1),
    leastFullPricePerTurn: round(least, 1),
    fullPriceOverLeast: round(fullPrice / least, 2),
  };
}

interface ModeResult {
  mode: Mode;
  settings: { HISTORY_WINDOW_MESSAGES: number; MAX_INPUT_TOKENS: number };
  chats: number;
  turns: number;
  /** Mean over chats of the per-turn figures, turn by turn. */
  cachedShareByTurn: number[];
  /** Message tokens only (the mock's prompt_tokens). */
  fromTurn3: Summary;
  /** With the tool definitions' tokens, as providers bill input: the target's figure. */
  billedFromTurn3: Summary;
  billedCachedShareByTurn: number[];
  bytePrefix: {
    meanShare: number;
    turnPairs: number;
    wholePrefix: number;
    firstDifference: Record<string, number>;
  };
  meetsTarget: boolean;
}

async function runMode(mode: Mode, opts: PromptCacheOptions): Promise<ModeResult> {
  const prefix = randomPrefix(`prompt-cache-${mode}`);
  const mock = await startMockLlm({ port: 0 });
  const config: Config = loadConfig({
    REDIS_URL,
    CHATLANE_PREFIX: prefix,
    LLM_BASE_URL: mock.url,
    LLM_MODEL: 'mock',
    ...(mode === 'smallWindow' && { HISTORY_WINDOW_MESSAGES: String(opts.smallWindowMessages) }),
  });
  const connection = createRedis(REDIS_URL, 'worker', 'chatlane:bench-prompt-cache');
  const admin = adminRedis();
  const chatKeys = Array.from({ length: opts.chats }, (_, i) => `pc-${mode}-${i}`);
  const perChat = new Map<string, RecordedRequest[][]>(chatKeys.map((k) => [k, []]));
  const words = Math.max(1, Math.round(opts.userMessageTokens / 1.1));
  try {
    await waitReady(connection, 10_000);
    const store = new ChatStore(connection, { prefix, maxEvents: config.EVENTS_MAX_LEN });
    const deps = turnDepsFromConfig(config, store, silentLogger());
    const limits = { maxPending: 1000, dedupWindowMs: 600_000 };
    for (let t = 0; t < opts.turns; t++) {
      const roundStart = Date.now();
      await Promise.all(
        chatKeys.map(async (chatKey, c) => {
          const id = `m${t}`;
          const text = `message ${t}: ${userText(c * 1000 + t, words)}`;
          const ingested = await store.ingest(chatKey, userMessage(chatKey, id, text), limits);
          if (ingested.status !== 'accepted') throw new Error(`${chatKey} turn ${t + 1}: ${ingested.status}`);
          const seen = mock.state.recorded(chatKey).length;
          const outcome = await runTurn(deps, chatKey);
          if (outcome.status !== 'done')
            throw new Error(`${chatKey} turn ${t + 1}: ${JSON.stringify(outcome)}`);
          perChat.get(chatKey)!.push(mock.state.recorded(chatKey).slice(seen));
        }),
      );
      if ((t + 1) % 10 === 0) progress(`prompt-cache ${mode}: ${t + 1}/${opts.turns} turns`);
      await sleep(Math.max(0, opts.roundMs - (Date.now() - roundStart)));
    }
  } finally {
    await deletePrefix(admin, prefix);
    admin.disconnect();
    await closeRedis(connection);
    await mock.close();
  }

  const figures = chatKeys.map((k) => figuresOf(perChat.get(k)!));
  const later = figures.flatMap((f) => f.slice(2));
  const pairs = figures.flatMap((f) => f.slice(1));
  const firstDifference: Record<string, number> = {};
  for (const p of pairs) firstDifference[p.firstDifference!] = (firstDifference[p.firstDifference!] ?? 0) + 1;
  const billed = summary(later.map((f) => f.billed));
  const byTurn = (pick: (f: TurnFigures) => Figures) =>
    Array.from({ length: opts.turns }, (_, t) => round(mean(figures.map((f) => share(pick(f[t]!)))), 3));
  return {
    mode,
    settings: {
      HISTORY_WINDOW_MESSAGES: config.HISTORY_WINDOW_MESSAGES,
      MAX_INPUT_TOKENS: config.MAX_INPUT_TOKENS,
    },
    chats: opts.chats,
    turns: opts.turns,
    cachedShareByTurn: byTurn((f) => f),
    fromTurn3: summary(later),
    billedFromTurn3: billed,
    billedCachedShareByTurn: byTurn((f) => f.billed),
    bytePrefix: {
      meanShare: round(mean(pairs.map((p) => p.bytePrefixShare!)), 3),
      turnPairs: pairs.length,
      wholePrefix: pairs.filter((p) => p.bytePrefixShare === 1).length,
      firstDifference,
    },
    meetsTarget: meets(CACHED_SHARE_TARGET, billed.cachedShareMin),
  };
}

export async function benchPromptCache(opts: PromptCacheOptions) {
  const modes: ModeResult[] = [];
  for (const mode of ['defaults', 'smallWindow'] as const) modes.push(await runMode(mode, opts));
  return {
    description:
      `${opts.chats} chats × ${opts.turns} turns, one ~${opts.userMessageTokens}-token user message per turn, ` +
      `rounds ${opts.roundMs} ms apart; real runTurn (turnDepsFromConfig wiring) against the mock model over HTTP. ` +
      'fromTurn3: input tokens as the mock counts them (message text and tool calls); billedFromTurn3 adds the ' +
      'tool definitions (JSON, gpt-tokenizer), which providers bill as input and cache first: the target is on it. ' +
      'Modes: defaults (HISTORY_WINDOW_MESSAGES 200, never outgrown) and smallWindow (a window the chat outgrows, no compaction).',
    target: CACHED_SHARE_TARGET,
    modes,
    // The target is the defaults' figure: smallWindow's window steps break the prefix on purpose.
    meetsTarget: modes[0]!.meetsTarget,
  };
}
