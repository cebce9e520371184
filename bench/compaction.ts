import type { LanguageModelV4Prompt } from '@ai-sdk/provider';
import { MockLanguageModelV4 } from 'ai/test';
import type { Job } from 'bullmq';
import { type Config, loadConfig } from '../src/shared/config.js';
import {
  type CompactionJob,
  createQueue,
  enqueueCompaction,
  enqueueTurn,
  QUEUES,
  type TurnJob,
} from '../src/shared/jobs.js';
import { silentLogger } from '../src/shared/logger.js';
import type { ChatMessage } from '../src/shared/messages.js';
import { closeRedis, createRedis, waitReady } from '../src/shared/redis.js';
import { ChatStore } from '../src/shared/store/chat-store.js';
import { countTextTokens } from '../src/shared/tokens.js';
import { type CompactionResult, compactChat } from '../src/worker/compaction/compact.js';
import { createCompactionWorker } from '../src/worker/compaction/compactor.js';
import { compactionDepsFromConfig } from '../src/worker/compaction/main.js';
import { turnDepsFromConfig } from '../src/worker/process/main.js';
import { runTurn, type TurnDeps, type TurnOutcome } from '../src/worker/turn/turn.js';
import { createTurnWorker } from '../src/worker/turn/turn-worker.js';
import { echoModel, usage } from './echo-model.js';
import {
  adminRedis,
  type CpuShare,
  counted,
  cpuMeter,
  deletePrefix,
  inBatches,
  mean,
  median,
  medianOf,
  meets,
  orderFor,
  percentile,
  prng,
  progress,
  REDIS_URL,
  randomPrefix,
  round,
  sleep,
  type Target,
  userMessage,
} from './util.js';

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

/** Plateau: the last 100 turns' mean within this fraction of turns 101-200's, and every turn ≤ MAX_INPUT_TOKENS. */
const FLAT_TOLERANCE = 0.05;
/** Linear: least-squares fit over all turns with R² at least this. */
const LINEAR_R2 = 0.99;

const LLM_ENV = {
  // Satisfies requireModel only; both models are replaced by in-process mocks.
  LLM_BASE_URL: 'http://127.0.0.1:9/v1',
  LLM_MODEL: 'bench-echo',
};

// ---------------------------------------------------------------------------------------
// Text and models

// Deterministic filler prose: the same texts in every mode and run.
const WORDS = (
  'the deploy window moved to friday because the database migration needs a quiet hour and ' +
  'support asked for a heads up before we switch traffic to the new region please confirm the ' +
  'rollback plan and who is on call while invoices are regenerated overnight for every customer ' +
  'Anna prefers the Berlin office on Tuesday budget 4200 euros ticket 1873 design review at noon'
).split(' ');

/** Message `i`: numbered filler text of at least `tokens` tokens (one or two over at most). */
function filler(i: number, tokens: number): string {
  const rand = prng(1000 + i);
  const words = [`message ${i}:`];
  while (countTextTokens(words.join(' ')) < tokens) words.push(WORDS[Math.floor(rand() * WORDS.length)]!);
  return words.join(' ');
}

function summaryText(tokens: number): string {
  const rand = prng(7);
  const sections = [
    'Goals and requests',
    'Facts and user preferences',
    'Decisions',
    'Open items',
    'Lookup hints',
  ];
  const lines: string[] = [];
  let s = 0;
  while (countTextTokens(lines.join('\n')) < tokens) {
    if (s < sections.length && lines.length % 3 === 0) lines.push(`## ${sections[s++]}`);
    lines.push(`- ${Array.from({ length: 6 }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(' ')}`);
  }
  return lines.join('\n');
}

/**
 * What the model receives, counted as `src/shared/tokens.ts` counts stored messages: the
 * text of every part (system prompt, text, tool-call name and input JSON, tool-result output
 * JSON) through gpt-tokenizer, plus 4 per message. Tool definitions are not counted (the
 * worker reserves 400 tokens for them).
 */
function promptTokens(prompt: LanguageModelV4Prompt): number {
  const texts: string[] = [];
  for (const m of prompt) {
    if (m.role === 'system') {
      texts.push(m.content);
      continue;
    }
    for (const p of m.content as Array<{
      type: string;
      text?: string;
      toolName?: string;
      input?: unknown;
      output?: unknown;
    }>) {
      if (p.type === 'text' || p.type === 'reasoning') texts.push(p.text ?? '');
      else if (p.type === 'tool-call') texts.push(p.toolName ?? '', JSON.stringify(p.input ?? null));
      else if (p.type === 'tool-result') texts.push(JSON.stringify(p.output ?? null));
    }
  }
  return countTextTokens(texts.join('\n')) + 4 * prompt.length;
}

/** The summariser: a fixed ~`tokens`-token summary after `latencyMs`. */
function summariserModel(text: string, latencyMs: number) {
  let calls = 0;
  const model: MockLanguageModelV4 = new MockLanguageModelV4({
    doGenerate: async () => {
      model.doGenerateCalls.length = 0;
      calls++;
      if (latencyMs > 0) await sleep(latencyMs);
      return {
        content: [{ type: 'text' as const, text }],
        finishReason: { unified: 'stop' as const, raw: 'stop' },
        usage,
        warnings: [],
      };
    },
  });
  return { model, calls: () => calls };
}

/** An assistant message shaped like the worker commits it (one `chat_send` call). */
function assistantMessage(chatKey: string, id: string, text: string): ChatMessage {
  return {
    id,
    role: 'assistant',
    parts: [
      { type: 'step-start' },
      {
        type: 'tool-chat_send',
        toolCallId: `call-${id}`,
        state: 'output-available',
        input: { text: `echo: ${text}` },
        output: { status: 'sent', id: '1700000000000-0' },
      },
      { type: 'step-start' },
    ],
    metadata: { ts: Date.now(), chatKey, runId: `seed-${id}`, kind: 'normal' },
  } as ChatMessage;
}

const limits = { maxPending: 1000, dedupWindowMs: 600_000 };

function benchConfig(prefix: string, env: Record<string, string>): Config {
  return loadConfig({ REDIS_URL, CHATLANE_PREFIX: prefix, ...LLM_ENV, ...env });
}

// ---------------------------------------------------------------------------------------
// Part 1: tokens per turn

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

async function conversation(
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
        // As src/worker/process/main.ts decides it; the compaction itself runs below, between turns.
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

async function tokensPerTurn(opts: CompactionOptions) {
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
      'when the history total ≥ COMPACT_AT_TOKENS (as src/worker/process/main.ts) and compactChat then runs synchronously ' +
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

// ---------------------------------------------------------------------------------------
// Part 2: turn latency while compaction runs

type LatencyMode = 'off' | 'on';

interface Dist {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

function dist(values: number[]): Dist {
  return {
    n: values.length,
    p50: round(percentile(values, 50), 1),
    p90: round(percentile(values, 90), 1),
    p99: round(percentile(values, 99), 1),
    max: round(Math.max(...values), 1),
    mean: round(mean(values), 1),
  };
}

interface LatencyMeasurement {
  mode: LatencyMode;
  chats: number;
  turns: number;
  outcomes: Record<string, number>;
  failedAttempts: number;
  seconds: number;
  turnsPerSec: number;
  /** Job processedOn → the turn's outcome (runTurn time plus BullMQ's processor wrapper), ms. */
  latencyMs: Dist;
  /** Message ingested → its turn's outcome (queue wait included), ms. */
  endToEndMs: Dist;
  /** Turns 2..N only: turn 1 of every chat runs before its first compaction is even enqueued. */
  latencyAfterFirstMs: Dist;
  /** Prompt tokens of turns' first steps (mean), and messages sent. */
  meanPromptTokens: number;
  meanPromptMessages: number;
  compaction?: {
    enqueued: number;
    /** Compactions that completed while turns were being measured, by result. */
    results: Record<string, number>;
    /** Attempts that threw (a stale CAS is thrown so BullMQ retries). */
    failedAttempts: number;
    summariserCalls: number;
    /** Distinct chats with an applied compaction, and those compacted again within the window. */
    chatsCompacted: number;
    chatsCompactedMoreThanOnce: number;
    /** Messages each applied compaction replaced (the previous summary included). */
    replacedMessages: Dist | null;
    durationMs: Dist | null;
    /** Turns during which a compaction of the same chat was running, and their latency. */
    turnsOverlappingOwnCompaction: number;
    latencyOverlappingOwnMs: Dist | null;
    /** Turns during which any compaction was running. */
    turnsOverlappingAnyCompaction: number;
  };
  seededTokensPerChat: number;
  cpu: CpuShare;
  processCpuUsPerTurn: number;
  redisCpuUsPerTurn: number;
  complete: boolean;
}

async function measureLatency(
  mode: LatencyMode,
  opts: CompactionOptions,
  label: string,
  chats: number,
  messagesPerChat: number,
): Promise<LatencyMeasurement> {
  const prefix = randomPrefix(`compaction-lat-${mode}`);
  const config = benchConfig(prefix, {
    MAX_INPUT_TOKENS: String(opts.maxInputTokens),
    HISTORY_KEEP_LAST_MESSAGES: String(opts.keepLastMessages),
    WORKER_CONCURRENCY: String(opts.concurrency),
    COMPACTION_CONCURRENCY: String(opts.compactionConcurrency),
  });
  const admin = adminRedis();
  const seeder = createRedis(REDIS_URL, 'ingress', 'chatlane:bench-seed');
  const connection = createRedis(REDIS_URL, 'worker', 'chatlane:bench-worker');
  const compactorConnection = createRedis(REDIS_URL, 'worker', 'chatlane:bench-compactor');
  const chatKeys = Array.from({ length: chats }, (_, i) => `bench-chat-${i}`);
  const pool = Array.from({ length: 400 }, (_, i) => filler(i, opts.userMessageTokens));
  const total = chats * messagesPerChat;
  try {
    await Promise.all([
      waitReady(seeder, 10_000),
      waitReady(connection, 10_000),
      waitReady(compactorConnection, 10_000),
    ]);
    const seedStore = new ChatStore(seeder, { prefix, maxEvents: config.EVENTS_MAX_LEN });

    // A long committed history per chat, committed as a turn commits (fenced, with token counts).
    let seededTokens = 0;
    await inBatches(chatKeys, 20, async (chatKey) => {
      const c = chatKeys.indexOf(chatKey);
      const messages = Array.from({ length: opts.seedMessages }, (_, i) => {
        const text = pool[(c * opts.seedMessages + i) % pool.length]!;
        return counted(
          i % 2 === 0 ? userMessage(chatKey, `s${i}`, text) : assistantMessage(chatKey, `s${i}`, text),
        );
      });
      const lease = await seedStore.acquire(chatKey, 'seeder', 10_000);
      if (!lease.ok) throw new Error(`seed ${chatKey}: busy`);
      const res = await seedStore.commit(chatKey, lease.fence, { runId: 'seed', consumed: [], messages });
      if (!res.ok) throw new Error(`seed ${chatKey}: ${res.reason}`);
      await seedStore.finish(chatKey, lease.fence, 'seeder', 'seed');
      if (c === 0) seededTokens = res.tokens;
    });
    if (seededTokens < config.COMPACT_AT_TOKENS) {
      throw new Error(
        `seeded history of ${seededTokens} tokens is under COMPACT_AT_TOKENS ${config.COMPACT_AT_TOKENS}`,
      );
    }
    progress(`${label}: seeded ${chats} chats × ${opts.seedMessages} messages (${seededTokens} tokens each)`);

    const store = new ChatStore(connection, { prefix, maxEvents: config.EVENTS_MAX_LEN });
    const turns = createQueue<TurnJob>(prefix, QUEUES.turns, connection);
    const compactionQueue = createQueue<CompactionJob>(prefix, QUEUES.compaction, connection);
    const producer = createQueue<TurnJob>(prefix, QUEUES.turns, seeder);

    // Every 10th first-step prompt is kept and counted after the clock stops: counting is CPU
    // work the real worker does not do, and the two modes send prompts of different sizes.
    const promptSamples: LanguageModelV4Prompt[] = [];
    const promptMessageSamples: number[] = [];
    const { model } = echoModel({
      latencyMs: opts.turnModelLatencyMs,
      onFirstStep: (prompt) => {
        if (promptMessageSamples.length % 10 === 0) promptSamples.push(prompt);
        promptMessageSamples.push(prompt.length);
      },
    });
    let compactionsEnqueued = 0;
    const deps: TurnDeps = {
      ...turnDepsFromConfig(config, store, silentLogger()),
      model,
      ...(mode === 'on'
        ? {
            // As src/worker/process/main.ts wires it.
            afterCommit: async (chatKey: string, historyTokens: number) => {
              if (historyTokens >= config.COMPACT_AT_TOKENS) {
                compactionsEnqueued++;
                await enqueueCompaction(compactionQueue, chatKey);
              }
            },
          }
        : {}),
    };

    // Per chat: the time its pending message was ingested and how many it has been sent.
    const ingestedAt = new Map<string, number>();
    const sentCount = new Map<string, number>();
    const latencies: number[] = [];
    const latenciesAfterFirst: number[] = [];
    const endToEnd: number[] = [];
    const turnSpans: Array<{ chatKey: string; from: number; to: number }> = [];
    const outcomes: Record<string, number> = {};
    let failedAttempts = 0;
    let done = 0;
    let feedError: unknown;
    let resolveEnd!: () => void;
    const ended = new Promise<void>((r) => {
      resolveEnd = r;
    });

    const feed = async (chatKey: string) => {
      const n = sentCount.get(chatKey) ?? 0;
      sentCount.set(chatKey, n + 1);
      const id = `n${n}`;
      ingestedAt.set(chatKey, performance.now());
      const res = await seedStore.ingest(
        chatKey,
        userMessage(chatKey, id, pool[(n * 37) % pool.length]!),
        limits,
      );
      if (res.status !== 'accepted') throw new Error(`${chatKey}: ingest ${res.status}`);
      await enqueueTurn(producer, chatKey);
    };

    const onOutcome = (outcome: TurnOutcome, job: Job<TurnJob>) => {
      outcomes[outcome.status] = (outcomes[outcome.status] ?? 0) + 1;
      if (outcome.status !== 'done') return;
      const chatKey = job.data.chatKey;
      const nowMs = Date.now();
      const latency = nowMs - (job.processedOn ?? Number.NaN);
      latencies.push(latency);
      if ((sentCount.get(chatKey) ?? 0) > 1) latenciesAfterFirst.push(latency);
      endToEnd.push(performance.now() - (ingestedAt.get(chatKey) ?? Number.NaN));
      turnSpans.push({ chatKey, from: job.processedOn ?? nowMs, to: nowMs });
      done += outcome.consumed;
      if (done >= total) resolveEnd();
      // The user answers as soon as the reply is there: the next message of this chat.
      else if ((sentCount.get(chatKey) ?? 0) < messagesPerChat) {
        feed(chatKey).catch((err: unknown) => {
          feedError = err;
          resolveEnd();
        });
      }
    };

    const worker = createTurnWorker(deps, {
      prefix,
      connection,
      concurrency: opts.concurrency,
      lockDurationMs: config.JOB_LOCK_MS,
      stalledIntervalMs: config.STALLED_INTERVAL_MS,
      turns,
      onOutcome,
    });
    worker.on('failed', () => failedAttempts++);

    // The real compactor, in this process (as `chatlane all` runs it), on its own connection.
    const summariser = summariserModel(summaryText(opts.summaryTokens), opts.summariserLatencyMs);
    const compactionResults: Record<string, number> = {};
    const compactionSpans: Array<{ chatKey: string; from: number; to: number }> = [];
    const compactionStarts = new Map<string, number>();
    let compactionFailed = 0;
    const replacedCounts: number[] = [];
    const appliedPerChat = new Map<string, number>();
    let measuring = true;
    const compactor =
      mode === 'on'
        ? createCompactionWorker(
            {
              ...compactionDepsFromConfig(
                config,
                new ChatStore(compactorConnection, { prefix, maxEvents: config.EVENTS_MAX_LEN }),
                silentLogger(),
              ),
              model: summariser.model,
            },
            {
              prefix,
              connection: compactorConnection,
              concurrency: opts.compactionConcurrency,
              lockDurationMs: config.JOB_LOCK_MS,
              stalledIntervalMs: config.STALLED_INTERVAL_MS,
            },
          )
        : undefined;
    if (compactor) {
      compactor.on('active', (job) => compactionStarts.set(String(job.id), Date.now()));
      const record = (job: Job<CompactionJob> | undefined, status: string) => {
        if (!job || !measuring) return;
        const from = compactionStarts.get(String(job.id));
        compactionStarts.delete(String(job.id));
        if (from !== undefined) compactionSpans.push({ chatKey: job.data.chatKey, from, to: Date.now() });
        compactionResults[status] = (compactionResults[status] ?? 0) + 1;
      };
      compactor.on('completed', (job, result: CompactionResult) => {
        if (measuring && result.status === 'applied') {
          replacedCounts.push(result.replaced);
          appliedPerChat.set(job.data.chatKey, (appliedPerChat.get(job.data.chatKey) ?? 0) + 1);
        }
        record(job, result.status);
      });
      compactor.on('failed', (job) => {
        if (measuring) compactionFailed++;
        record(job, 'failed');
      });
      await compactor.waitUntilReady();
    }
    await worker.waitUntilReady();

    const stopMeter = await cpuMeter(admin);
    const started = performance.now();
    worker.run().catch((err: unknown) => progress(`turn worker stopped: ${String(err)}`));
    compactor?.run().catch((err: unknown) => progress(`compaction worker stopped: ${String(err)}`));
    // Every chat's first message at once; each next one when its predecessor's turn is done.
    await inBatches(chatKeys, 50, feed);
    const timer = setTimeout(() => {
      feedError = new Error(`${label}: turns did not finish within ${opts.timeoutMs}ms`);
      resolveEnd();
    }, opts.timeoutMs);
    await ended;
    clearTimeout(timer);
    const finished = performance.now();
    measuring = false;
    const cpu = await stopMeter();
    // Compactions still running at the end: their spans count for overlap until now.
    const endMs = Date.now();
    for (const [id, from] of compactionStarts) {
      const job = await compactionQueue.getJob(id);
      if (job) compactionSpans.push({ chatKey: job.data.chatKey, from, to: endMs });
    }
    await worker.close();
    await compactor?.close();
    await Promise.all([turns.close(), compactionQueue.close(), producer.close()]);
    if (feedError) throw feedError;

    // Overlap: a turn [from, to] with a compaction span of the same chat (or any) overlapping it.
    const byChat = new Map<string, Array<{ from: number; to: number }>>();
    for (const s of compactionSpans) byChat.set(s.chatKey, [...(byChat.get(s.chatKey) ?? []), s]);
    const overlaps = (a: { from: number; to: number }, b: { from: number; to: number }) =>
      a.from < b.to && b.from < a.to;
    const overlapping = turnSpans.filter((t) => (byChat.get(t.chatKey) ?? []).some((c) => overlaps(t, c)));
    const own = overlapping.length;
    const any = turnSpans.filter((t) => compactionSpans.some((c) => overlaps(t, c))).length;

    // Checked after the clock stopped: every inbox empty.
    const check = seeder.pipeline();
    for (const chatKey of chatKeys) check.xlen(store.keys(chatKey).inbox);
    const empty = ((await check.exec()) ?? []).filter(([, n]) => Number(n) === 0).length;

    const seconds = (finished - started) / 1000;
    const turnsRan = latencies.length;
    const compactionDurations = compactionSpans.map((s) => s.to - s.from);
    const result: LatencyMeasurement = {
      mode,
      chats,
      turns: turnsRan,
      outcomes,
      failedAttempts,
      seconds: round(seconds),
      turnsPerSec: round(turnsRan / seconds, 1),
      latencyMs: dist(latencies),
      endToEndMs: dist(endToEnd),
      latencyAfterFirstMs: dist(latenciesAfterFirst),
      meanPromptTokens: round(mean(promptSamples.map(promptTokens)), 1),
      meanPromptMessages: round(mean(promptMessageSamples), 1),
      ...(mode === 'on'
        ? {
            compaction: {
              enqueued: compactionsEnqueued,
              results: compactionResults,
              failedAttempts: compactionFailed,
              summariserCalls: summariser.calls(),
              durationMs: compactionDurations.length > 0 ? dist(compactionDurations) : null,
              chatsCompacted: appliedPerChat.size,
              chatsCompactedMoreThanOnce: [...appliedPerChat.values()].filter((n) => n > 1).length,
              replacedMessages: replacedCounts.length > 0 ? dist(replacedCounts) : null,
              turnsOverlappingOwnCompaction: own,
              latencyOverlappingOwnMs: own > 0 ? dist(overlapping.map((t) => t.to - t.from)) : null,
              turnsOverlappingAnyCompaction: any,
            },
          }
        : {}),
      seededTokensPerChat: seededTokens,
      cpu,
      processCpuUsPerTurn: round((cpu.benchCpuS * 1e6) / Math.max(1, turnsRan), 1),
      redisCpuUsPerTurn: round((cpu.redisCpuS * 1e6) / Math.max(1, turnsRan), 1),
      complete: done === total && turnsRan === total && empty === chats,
    };
    progress(
      `${label}: ${turnsRan} turns in ${result.seconds}s, latency p50 ${result.latencyMs.p50} / p99 ` +
        `${result.latencyMs.p99} ms` +
        (result.compaction
          ? `, compactions ${JSON.stringify(result.compaction.results)}, overlapping own ${own}`
          : ''),
    );
    return result;
  } finally {
    await closeRedis(compactorConnection);
    await closeRedis(connection);
    await closeRedis(seeder);
    await deletePrefix(admin, prefix);
    admin.disconnect();
  }
}

interface LatencyRun {
  order: LatencyMode[];
  off: LatencyMeasurement;
  on: LatencyMeasurement;
  p50Ratio: number;
  p99Ratio: number;
  /** The same ratios over turns 2..N (turn 1 of a chat never overlaps its compaction). */
  p50RatioAfterFirst: number;
  p99RatioAfterFirst: number;
  cpuPerTurnRatio: number;
}

async function turnLatency(opts: CompactionOptions) {
  if (opts.warmupChats > 0) {
    // Discarded: the first measurement of the process would otherwise also pay for JIT warm-up.
    for (const mode of ['off', 'on'] as const) {
      await measureLatency(
        mode,
        opts,
        `compaction latency warm-up ${mode}`,
        opts.warmupChats,
        opts.warmupMessages,
      );
    }
  }
  const runs: LatencyRun[] = [];
  for (let run = 0; run < opts.runs; run++) {
    const order = orderFor(run, 'off', 'on');
    const m = {} as Record<LatencyMode, LatencyMeasurement>;
    for (const mode of order) {
      m[mode] = await measureLatency(
        mode,
        opts,
        `compaction latency run ${run + 1} ${mode}`,
        opts.chats,
        opts.messagesPerChat,
      );
    }
    runs.push({
      order,
      off: m.off,
      on: m.on,
      p50Ratio: round(m.on.latencyMs.p50 / m.off.latencyMs.p50),
      p99Ratio: round(m.on.latencyMs.p99 / m.off.latencyMs.p99),
      p50RatioAfterFirst: round(m.on.latencyAfterFirstMs.p50 / m.off.latencyAfterFirstMs.p50),
      p99RatioAfterFirst: round(m.on.latencyAfterFirstMs.p99 / m.off.latencyAfterFirstMs.p99),
      cpuPerTurnRatio: round(m.on.processCpuUsPerTurn / m.off.processCpuUsPerTurn),
    });
  }
  const p50Ratio = medianOf(runs, (r) => r.p50Ratio);
  const p99Ratio = medianOf(runs, (r) => r.p99Ratio);
  const pick = (mode: LatencyMode, f: (x: LatencyMeasurement) => number) =>
    median(runs.map((r) => f(r[mode])));
  const side = (mode: LatencyMode) => ({
    latencyP50Ms: pick(mode, (x) => x.latencyMs.p50),
    latencyP99Ms: pick(mode, (x) => x.latencyMs.p99),
    latencyAfterFirstP50Ms: pick(mode, (x) => x.latencyAfterFirstMs.p50),
    latencyAfterFirstP99Ms: pick(mode, (x) => x.latencyAfterFirstMs.p99),
    endToEndP50Ms: pick(mode, (x) => x.endToEndMs.p50),
    endToEndP99Ms: pick(mode, (x) => x.endToEndMs.p99),
    turnsPerSec: pick(mode, (x) => x.turnsPerSec),
    processCpuUsPerTurn: pick(mode, (x) => x.processCpuUsPerTurn),
    redisCpuUsPerTurn: pick(mode, (x) => x.redisCpuUsPerTurn),
    processCpuPct: pick(mode, (x) => x.cpu.benchProcessPct),
    meanPromptMessages: pick(mode, (x) => x.meanPromptMessages),
    meanPromptTokens: pick(mode, (x) => x.meanPromptTokens),
  });
  return {
    description:
      `${opts.chats} chats, each seeded with ${opts.seedMessages} committed messages (over COMPACT_AT_TOKENS), then ` +
      `sent ${opts.messagesPerChat} messages one after another (ingest + enqueueTurn; the next one as soon as the ` +
      `previous turn's outcome is reported). createTurnWorker (concurrency ${opts.concurrency}, echo model with ` +
      `${opts.turnModelLatencyMs} ms per call, 2 calls per turn) and, in mode on, createCompactionWorker ` +
      `(concurrency ${opts.compactionConcurrency}, summariser ${opts.summariserLatencyMs} ms) in the same process, ` +
      'afterCommit enqueueing compactions as src/worker/process/main.ts does. Latency = job processedOn → turn outcome. ' +
      `Modes alternate order per run; a discarded warm-up (${opts.warmupChats} chats × ${opts.warmupMessages} ` +
      'messages, both modes) precedes run 1.',
    runs,
    median: {
      off: side('off'),
      on: side('on'),
      p50Ratio,
      p99Ratio,
      p50RatioAfterFirst: medianOf(runs, (r) => r.p50RatioAfterFirst),
      p99RatioAfterFirst: medianOf(runs, (r) => r.p99RatioAfterFirst),
      cpuPerTurnRatio: medianOf(runs, (r) => r.cpuPerTurnRatio),
      onCompactionsApplied: medianOf(runs, (r) => r.on.compaction?.results.applied ?? 0),
      onTurnsOverlappingOwnCompaction: medianOf(
        runs,
        (r) => r.on.compaction?.turnsOverlappingOwnCompaction ?? 0,
      ),
      onLatencyOverlappingOwnP50Ms: medianOf(
        runs,
        (r) => r.on.compaction?.latencyOverlappingOwnMs?.p50 ?? Number.NaN,
      ),
      onLatencyOverlappingOwnP99Ms: medianOf(
        runs,
        (r) => r.on.compaction?.latencyOverlappingOwnMs?.p99 ?? Number.NaN,
      ),
    },
    target: LATENCY_TARGET,
    meetsTarget:
      meets(LATENCY_TARGET, p50Ratio) &&
      meets(LATENCY_TARGET, p99Ratio) &&
      runs.every((r) => r.on.complete && r.off.complete),
  };
}

export async function benchCompaction(opts: CompactionOptions) {
  const tokens = await tokensPerTurn(opts);
  const latency = await turnLatency(opts);
  return {
    settings: opts,
    tokensPerTurn: tokens,
    latency,
    meetsTarget: tokens.meetsTarget && latency.meetsTarget,
  };
}
