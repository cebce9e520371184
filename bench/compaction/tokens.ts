import { silentLogger } from '../../src/shared/logger.js';
import { closeRedis, createRedis, waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { countTextTokens } from '../../src/shared/tokens.js';
import { type CompactionResult, compactChat } from '../../src/worker/compaction/compact.js';
import { compactionDepsFromConfig } from '../../src/worker/compaction/compaction-deps.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../../src/worker/turn/turn-deps.js';
import { echoModel } from '../lib/echo-model.js';
import {
  adminRedis,
  deletePrefix,
  mean,
  progress,
  REDIS_URL,
  randomPrefix,
  round,
  userMessage,
} from '../lib/util.js';
import { benchConfig, filler, limits, promptTokens, summariserModel, summaryText } from './fixtures.js';
import type { CompactionOptions } from './options.js';

/** Plateau: the last 100 turns' mean within this fraction of turns 101-200's, and every turn ≤ MAX_INPUT_TOKENS. */
const FLAT_TOLERANCE = 0.05;
/** Linear: least-squares fit over all turns with R² at least this. */
const LINEAR_R2 = 0.99;

/**
 * Part 1 of the compaction benchmark: tokens the model receives per turn over one long
 * conversation, with compaction, with the hard cut only, and unbounded (deterministic: one run).
 */

type ConversationMode = 'compactionOn' | 'hardCutOnly' | 'unbounded' | 'unboundedDefaultWindow';

interface ConversationResult {
  mode: ConversationMode;
  settings: {
    MAX_INPUT_TOKENS: number;
    HISTORY_WINDOW_MESSAGES: number;
    HISTORY_KEEP_LAST_MESSAGES: number;
    COMPACT_AT_TOKENS: number | null;
    KEEP_RECENT_TOKENS: number | null;
  };
  turns: number;
  seconds: number;
  /** Tokens of the first step's prompt, turn by turn (index 0 = turn 1). */
  promptTokens: number[];
  /** Messages of that prompt (system included), turn by turn. */
  promptMessages: number[];
  /** The history's token total after each commit (what afterCommit sees). */
  historyTokens: number[];
  /** Compactions run (mode compactionOn): after which turn, and what they did. */
  compactions: Array<{
    afterTurn: number;
    status: CompactionResult['status'];
    tokensBefore?: number;
    tokensAfter?: number;
    replaced?: number;
  }>;
  stats: TokenStats;
}

interface TokenStats {
  max: number;
  maxTurn: number;
  meanLast100: number;
  minLast100: number;
  maxLast100: number;
  meanTurns101to200: number;
  /** Least-squares slope (tokens per turn) and R² over all turns. */
  slopePerTurn: number;
  r2: number;
  /** Slope over the last 100 turns only: ~0 for a plateau. */
  slopeLast100: number;
}

function leastSquares(ys: number[], from = 0): { slope: number; r2: number } {
  const pts = ys.slice(from).map((y, i) => [from + i + 1, y] as const);
  const n = pts.length;
  const mx = pts.reduce((s, [x]) => s + x, 0) / n;
  const my = pts.reduce((s, [, y]) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (const [x, y] of pts) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
    syy += (y - my) ** 2;
  }
  const slope = sxx === 0 ? 0 : sxy / sxx;
  const r2 = syy === 0 || sxx === 0 ? 0 : (sxy * sxy) / (sxx * syy);
  return { slope, r2 };
}

function tokenStats(series: number[]): TokenStats {
  const last100 = series.slice(-100);
  const max = Math.max(...series);
  const all = leastSquares(series);
  return {
    max,
    maxTurn: series.indexOf(max) + 1,
    meanLast100: round(mean(last100), 1),
    minLast100: Math.min(...last100),
    maxLast100: Math.max(...last100),
    meanTurns101to200: round(mean(series.slice(100, 200)), 1),
    slopePerTurn: round(all.slope, 2),
    r2: round(all.r2, 4),
    slopeLast100: round(leastSquares(series, series.length - 100).slope, 2),
  };
}

export async function conversation(
  mode: ConversationMode,
  opts: CompactionOptions,
  texts: string[],
): Promise<ConversationResult> {
  const prefix = randomPrefix(`compaction-${mode}`);
  const unbounded = mode === 'unbounded' || mode === 'unboundedDefaultWindow';
  const config = benchConfig(prefix, {
    MAX_INPUT_TOKENS: String(unbounded ? opts.unboundedMaxInputTokens : opts.maxInputTokens),
    HISTORY_KEEP_LAST_MESSAGES: String(opts.keepLastMessages),
    ...(mode === 'unbounded' ? { HISTORY_WINDOW_MESSAGES: String(opts.unboundedWindowMessages) } : {}),
  });
  const admin = adminRedis();
  const connection = createRedis(REDIS_URL, 'worker', 'chatlane:bench-compaction');
  const chatKey = 'bench-conversation';
  const prompts: number[] = [];
  const promptMessages: number[] = [];
  const historyTokens: number[] = [];
  const compactions: ConversationResult['compactions'] = [];
  try {
    await waitReady(connection, 10_000);
    const store = new ChatStore(connection, { prefix, maxEvents: config.EVENTS_MAX_LEN });
    const { model } = echoModel({
      latencyMs: 0,
      onFirstStep: (prompt) => {
        prompts.push(promptTokens(prompt));
        promptMessages.push(prompt.length);
      },
    });
    const summariser = summariserModel(summaryText(opts.summaryTokens), 0);
    const compactionDeps = {
      ...compactionDepsFromConfig(config, store, silentLogger()),
      model: summariser.model,
    };
    let due = false;
    const deps: TurnDeps = {
      ...turnDepsFromConfig(config, store, silentLogger()),
      model,
      afterCommit: async (_chatKey, tokens) => {
        historyTokens.push(tokens);
        // As src/roles/worker.ts decides it; the compaction itself runs below, between turns.
        if (mode === 'compactionOn' && tokens >= config.COMPACT_AT_TOKENS) due = true;
      },
    };
    const started = performance.now();
    for (let t = 0; t < opts.conversationTurns; t++) {
      const id = `m${t}`;
      const ingested = await store.ingest(chatKey, userMessage(chatKey, id, texts[t]!), limits);
      if (ingested.status !== 'accepted') throw new Error(`turn ${t + 1}: ingest ${ingested.status}`);
      const outcome = await runTurn(deps, chatKey);
      if (outcome.status !== 'done' || outcome.consumed !== 1 || prompts.length !== t + 1) {
        throw new Error(`turn ${t + 1}: ${JSON.stringify(outcome)}, ${prompts.length} prompts seen`);
      }
      if (due) {
        due = false;
        const res = await compactChat(compactionDeps, chatKey);
        compactions.push({
          afterTurn: t + 1,
          status: res.status,
          ...(res.status === 'applied'
            ? { tokensBefore: res.tokensBefore, tokensAfter: res.tokensAfter, replaced: res.replaced }
            : {}),
        });
      }
      if ((t + 1) % 100 === 0)
        progress(`compaction tokens ${mode}: turn ${t + 1}, prompt ${prompts[t]} tokens`);
    }
    const seconds = (performance.now() - started) / 1000;
    return {
      mode,
      settings: {
        MAX_INPUT_TOKENS: config.MAX_INPUT_TOKENS,
        HISTORY_WINDOW_MESSAGES: config.HISTORY_WINDOW_MESSAGES,
        HISTORY_KEEP_LAST_MESSAGES: config.HISTORY_KEEP_LAST_MESSAGES,
        COMPACT_AT_TOKENS: mode === 'compactionOn' ? config.COMPACT_AT_TOKENS : null,
        KEEP_RECENT_TOKENS: mode === 'compactionOn' ? config.KEEP_RECENT_TOKENS : null,
      },
      turns: prompts.length,
      seconds: round(seconds, 1),
      promptTokens: prompts,
      promptMessages,
      historyTokens,
      compactions,
      stats: tokenStats(prompts),
    };
  } finally {
    await closeRedis(connection);
    await deletePrefix(admin, prefix);
    admin.disconnect();
  }
}

export async function tokensPerTurn(opts: CompactionOptions) {
  const texts = Array.from({ length: opts.conversationTurns }, (_, i) => filler(i, opts.userMessageTokens));
  const modes: ConversationMode[] = ['compactionOn', 'hardCutOnly', 'unbounded', 'unboundedDefaultWindow'];
  const results = {} as Record<ConversationMode, ConversationResult>;
  for (const mode of modes) {
    progress(`compaction tokens: ${mode}, ${opts.conversationTurns} turns`);
    results[mode] = await conversation(mode, opts, texts);
    progress(
      `compaction tokens: ${mode} done in ${results[mode].seconds}s, ${JSON.stringify(results[mode].stats)}`,
    );
  }
  const at = [1, ...Array.from({ length: Math.floor(opts.conversationTurns / 50) }, (_, i) => (i + 1) * 50)];
  const curve = at.map((turn) => ({
    turn,
    compactionOn: results.compactionOn.promptTokens[turn - 1],
    hardCutOnly: results.hardCutOnly.promptTokens[turn - 1],
    unbounded: results.unbounded.promptTokens[turn - 1],
    unboundedDefaultWindow: results.unboundedDefaultWindow.promptTokens[turn - 1],
  }));
  const flat = (r: ConversationResult) =>
    r.stats.max <= opts.maxInputTokens &&
    Math.abs(r.stats.meanLast100 / r.stats.meanTurns101to200 - 1) <= FLAT_TOLERANCE;
  const linear = (r: ConversationResult) => r.stats.slopePerTurn > 0 && r.stats.r2 >= LINEAR_R2;
  const verdict = {
    compactionOnFlat: flat(results.compactionOn),
    hardCutOnlyFlat: flat(results.hardCutOnly),
    unboundedLinear: linear(results.unbounded),
  };
  const textTokens = texts.map(countTextTokens);
  const applied = results.compactionOn.compactions.filter((c) => c.status === 'applied');
  return {
    description:
      `one chat, ${opts.conversationTurns} user messages of ~${opts.userMessageTokens} tokens sent one at a time, ` +
      'each turn run to completion with runTurn (production turnDepsFromConfig wiring, zero-latency echo model: ' +
      'chat_send with an echo, then stop) before the next message. Tokens = what the model receives on each ' +
      "turn's first step (system prompt + messages; text, tool-call input and tool-result output JSON through " +
      'gpt-tokenizer, + 4 per message; tool definitions not counted). compactionOn: afterCommit flags the chat ' +
      'when the history total ≥ COMPACT_AT_TOKENS (as src/roles/worker.ts) and compactChat then runs synchronously ' +
      'before the next message (a compactor that always keeps up), with a zero-latency mock summariser. ' +
      'hardCutOnly: no compaction, the TokenBudgetCompressor cuts. unbounded: MAX_INPUT_TOKENS 10,000,000 and ' +
      `HISTORY_WINDOW_MESSAGES ${opts.unboundedWindowMessages}; unboundedDefaultWindow: the same budget with the ` +
      'default window of 200 messages.',
    messageTextTokens: {
      min: Math.min(...textTokens),
      max: Math.max(...textTokens),
      mean: round(mean(textTokens), 1),
    },
    summaryTokens: countTextTokens(summaryText(opts.summaryTokens)),
    curve,
    stats: Object.fromEntries(modes.map((m) => [m, results[m].stats])),
    compactionsApplied: applied.length,
    firstCompactionAfterTurn: applied[0]?.afterTurn ?? null,
    modes: results,
    target: {
      metric:
        `compactionOn and hardCutOnly flat after the threshold (every turn ≤ MAX_INPUT_TOKENS ${opts.maxInputTokens}, ` +
        `mean of the last 100 turns within ${FLAT_TOLERANCE * 100}% of turns 101-200's); unbounded grows linearly ` +
        `(least-squares slope > 0, R² ≥ ${LINEAR_R2})`,
    },
    verdict,
    meetsTarget: verdict.compactionOnFlat && verdict.hardCutOnlyFlat && verdict.unboundedLinear,
  };
}
