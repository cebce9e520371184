import { randomUUID } from 'node:crypto';
import { loadConfig } from '../src/shared/config.js';
import { silentLogger } from '../src/shared/logger.js';
import type { ChatMessage } from '../src/shared/messages.js';
import { closeRedis, createRedis } from '../src/shared/redis.js';
import { ChatStore } from '../src/shared/store/chat-store.js';
import type { RuntimeContext } from '../src/worker/pipeline/types.js';
import { turnDepsFromConfig } from '../src/worker/turn/turn-deps.js';
import { echoModel } from './lib/echo-model.js';
import {
  adminRedis,
  counted,
  deletePrefix,
  mean,
  medianOf,
  meets,
  percentile,
  prng,
  progress,
  REDIS_URL,
  randomPrefix,
  round,
  type Target,
} from './lib/util.js';

/**
 * The context pipeline of one turn (Provider → Compressor → Assembler) on a chat with a
 * short history against one with a huge history. The design promise is O(window), never
 * O(history): the stages must not get slower as history grows past the window.
 */

export interface PipelineOptions {
  runs: number;
  iterations: number;
  warmup: number;
  smallHistory: number;
  bigHistory: number;
  maxInputTokens: number;
  windowMessages: number;
}

export const PIPELINE_DEFAULTS: PipelineOptions = {
  runs: 3,
  iterations: 200,
  warmup: 30,
  smallHistory: 100,
  bigHistory: 100_000,
  maxInputTokens: 12_000,
  windowMessages: 200,
};

export const PIPELINE_TARGET: Target = {
  metric: 'ratio = p50(100k history) ÷ p50(100 history)',
  comparator: '<=',
  value: 1.2,
};

export interface StageTimes {
  historyMessages: number;
  iterations: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** Median per stage, to say where the time goes. */
  loadP50Ms: number;
  compressP50Ms: number;
  assembleP50Ms: number;
  /** What the model would be given: messages after compression, and model messages assembled. */
  keptMessages: number;
  modelMessages: number;
}

export interface PipelineRun {
  small: StageTimes;
  /** A chat whose history exactly fills the window: isolates history length from window fill. */
  windowFull: StageTimes;
  big: StageTimes;
  ratio: number;
  ratioVsWindowFull: number;
}

// Deterministic filler prose: the same texts every run, so runs differ only by machine noise.
const WORDS = (
  'the deploy window moved to friday because the database migration needs a quiet hour and ' +
  'support asked for a heads up before we switch traffic to the new region please confirm the ' +
  'rollback plan and who is on call while invoices are regenerated overnight for every customer'
).split(' ');

const POOL_SIZE = 64;

/** A pool of committed-message templates with their token counts computed once, as commit does. */
function messagePool(chatKey: string): ChatMessage[] {
  const rand = prng(42);
  const pool: ChatMessage[] = [];
  for (let i = 0; i < POOL_SIZE; i++) {
    const words = 25 + Math.floor(rand() * 21);
    const text = Array.from({ length: words }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(' ');
    const runId = randomUUID();
    // Alternate user messages and assistant turns shaped like the worker commits them.
    const message: ChatMessage =
      i % 2 === 0
        ? {
            id: `u${i}`,
            role: 'user',
            parts: [{ type: 'text', text }],
            metadata: { ts: 1_700_000_000_000, chatKey, kind: 'normal', channel: 'api', messageId: `u${i}` },
          }
        : {
            id: `${runId}-a0`,
            role: 'assistant',
            parts: [
              { type: 'step-start' },
              {
                type: 'tool-chat_send',
                toolCallId: `call-${i}`,
                state: 'output-available',
                input: { text },
                output: { status: 'sent', id: '1700000000000-0' },
              },
              { type: 'step-start' },
            ],
            metadata: { ts: 1_700_000_000_000, chatKey, runId, kind: 'normal' },
          };
    pool.push(counted(message));
  }
  return pool;
}

async function seed(store: ChatStore, chatKey: string, count: number): Promise<void> {
  const pool = messagePool(chatKey);
  const hist = store.keys(chatKey).hist;
  const chunk = 1000;
  let pipeline = store.redis.pipeline();
  let queued = 0;
  for (let start = 0; start < count; start += chunk) {
    const values: string[] = [];
    for (let i = start; i < Math.min(count, start + chunk); i++) {
      const template = pool[i % POOL_SIZE]!;
      values.push(JSON.stringify({ ...template, id: `${template.id}-${i}` }));
    }
    pipeline.rpush(hist, ...values);
    // Bounded pipelines: one 50 MB write would only test client buffering.
    if (++queued === 10) {
      await pipeline.exec();
      pipeline = store.redis.pipeline();
      queued = 0;
    }
  }
  if (queued > 0) await pipeline.exec();
  const pending: ChatMessage = {
    id: 'pending-1',
    role: 'user',
    parts: [{ type: 'text', text: 'And what about the rollback plan, who owns it this time?' }],
    metadata: { ts: Date.now(), chatKey, kind: 'normal', channel: 'api', messageId: 'pending-1' },
  };
  await store.ingest(chatKey, pending, { maxPending: 1000, dedupWindowMs: 60_000 });
}

type Deps = ReturnType<typeof turnDepsFromConfig>;

interface Sample {
  total: number;
  load: number;
  compress: number;
  assemble: number;
  kept: number;
  modelMessages: number;
}

async function once(deps: Deps, chatKey: string, budget: number): Promise<Sample> {
  const context: RuntimeContext = { chatKey };
  const t0 = performance.now();
  const loaded = await deps.provider.load(chatKey);
  const t1 = performance.now();
  const compressed = deps.compressor.compress(
    [...loaded.history, ...loaded.pending.map((e) => e.message)],
    budget,
  );
  const t2 = performance.now();
  const assembled = await deps.assembler.assemble({ context, messages: compressed.messages });
  const t3 = performance.now();
  return {
    total: t3 - t0,
    load: t1 - t0,
    compress: t2 - t1,
    assemble: t3 - t2,
    kept: compressed.messages.length,
    modelMessages: assembled.messages.length,
  };
}

function times(historyMessages: number, samples: Sample[]): StageTimes {
  const total = samples.map((s) => s.total);
  return {
    historyMessages,
    iterations: samples.length,
    p50Ms: round(percentile(total, 50)),
    p99Ms: round(percentile(total, 99)),
    meanMs: round(mean(total)),
    loadP50Ms: round(
      percentile(
        samples.map((s) => s.load),
        50,
      ),
    ),
    compressP50Ms: round(
      percentile(
        samples.map((s) => s.compress),
        50,
      ),
    ),
    assembleP50Ms: round(
      percentile(
        samples.map((s) => s.assemble),
        50,
      ),
    ),
    keptMessages: samples.at(-1)?.kept ?? 0,
    modelMessages: samples.at(-1)?.modelMessages ?? 0,
  };
}

async function measure(opts: PipelineOptions, run: number): Promise<PipelineRun> {
  const prefix = randomPrefix('pipe');
  const admin = adminRedis();
  const redis = createRedis(REDIS_URL, 'worker', 'chatlane:bench-pipeline');
  try {
    const config = loadConfig({
      REDIS_URL,
      CHATLANE_PREFIX: prefix,
      LLM_BASE_URL: 'http://127.0.0.1:9/v1',
      LLM_MODEL: 'bench-echo',
      MAX_INPUT_TOKENS: String(opts.maxInputTokens),
      HISTORY_WINDOW_MESSAGES: String(opts.windowMessages),
    });
    const store = new ChatStore(redis, { prefix, maxEvents: config.EVENTS_MAX_LEN });
    // Production wiring of the three stages; the model is never called here.
    const deps = { ...turnDepsFromConfig(config, store, silentLogger()), model: echoModel().model };
    const chats = [
      { name: 'small', chatKey: 'bench-small', history: opts.smallHistory },
      { name: 'windowFull', chatKey: 'bench-window', history: opts.windowMessages },
      { name: 'big', chatKey: 'bench-big', history: opts.bigHistory },
    ] as const;
    for (const c of chats) await seed(store, c.chatKey, c.history);
    progress(`pipeline run ${run + 1}: seeded ${chats.map((c) => c.history).join(' / ')} history messages`);

    // As runTurn computes it; of the history only a leading summary changes the system
    // prompt (its rule), and these seeded histories have none.
    const system = deps.assembler.systemTokens({ chatKey: 'bench-big' });
    const budget = deps.settings.maxInputTokens - system - deps.settings.reserveTokens;

    const samples: Record<(typeof chats)[number]['name'], Sample[]> = { small: [], windowFull: [], big: [] };
    // Interleaved, and rotated so no chat always runs right after the same other one (a GC
    // or a noisy neighbour then lands on every chat alike).
    for (let i = 0; i < opts.warmup + opts.iterations; i++) {
      for (let j = 0; j < chats.length; j++) {
        const c = chats[(i + j) % chats.length]!;
        const s = await once(deps, c.chatKey, budget);
        if (i >= opts.warmup) samples[c.name].push(s);
      }
    }
    const small = times(opts.smallHistory, samples.small);
    const windowFull = times(opts.windowMessages, samples.windowFull);
    const big = times(opts.bigHistory, samples.big);
    const result = {
      small,
      windowFull,
      big,
      ratio: round(big.p50Ms / small.p50Ms),
      ratioVsWindowFull: round(big.p50Ms / windowFull.p50Ms),
    };
    progress(
      `pipeline run ${run + 1}: p50 ${small.p50Ms} / ${windowFull.p50Ms} / ${big.p50Ms} ms, ratio ${result.ratio}`,
    );
    return result;
  } finally {
    await closeRedis(redis);
    await deletePrefix(admin, prefix);
    admin.disconnect();
  }
}

export async function benchPipeline(opts: PipelineOptions) {
  const runs: PipelineRun[] = [];
  for (let run = 0; run < opts.runs; run++) runs.push(await measure(opts, run));
  const ratio = medianOf(runs, (r) => r.ratio);
  return {
    description:
      `provider.load → compressor.compress(budget) → assembler.assemble, ${opts.iterations} iterations after ` +
      `${opts.warmup} warm-up, interleaved; histories of ${opts.smallHistory} and ${opts.bigHistory} messages ` +
      `(~30-60 tokens each, metadata.tokens set) + 1 pending; MAX_INPUT_TOKENS ${opts.maxInputTokens}, ` +
      `window ${opts.windowMessages}. Also a ${opts.windowMessages}-message chat (window exactly full) as a control`,
    settings: opts,
    runs,
    median: {
      smallP50Ms: medianOf(runs, (r) => r.small.p50Ms),
      smallP99Ms: medianOf(runs, (r) => r.small.p99Ms),
      windowFullP50Ms: medianOf(runs, (r) => r.windowFull.p50Ms),
      windowFullP99Ms: medianOf(runs, (r) => r.windowFull.p99Ms),
      bigP50Ms: medianOf(runs, (r) => r.big.p50Ms),
      bigP99Ms: medianOf(runs, (r) => r.big.p99Ms),
      ratio,
      ratioVsWindowFull: medianOf(runs, (r) => r.ratioVsWindowFull),
    },
    target: PIPELINE_TARGET,
    meetsTarget: meets(PIPELINE_TARGET, ratio),
  };
}
