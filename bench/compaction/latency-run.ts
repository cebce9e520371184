import type { LanguageModelV4Prompt } from '@ai-sdk/provider';
import type { Job } from 'bullmq';
import {
  type CompactionJob,
  createQueue,
  enqueueCompaction,
  enqueueTurn,
  QUEUES,
  type TurnJob,
} from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import { closeRedis, createRedis, waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import type { CompactionResult } from '../../src/worker/compaction/compact.js';
import { compactionDepsFromConfig } from '../../src/worker/compaction/compaction-deps.js';
import { createCompactionWorker } from '../../src/worker/compaction/compactor.js';
import type { TurnDeps, TurnOutcome } from '../../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../../src/worker/turn/turn-deps.js';
import { createTurnWorker } from '../../src/worker/turn/turn-worker.js';
import { echoModel } from '../lib/echo-model.js';
import {
  adminRedis,
  type CpuShare,
  counted,
  cpuMeter,
  deletePrefix,
  inBatches,
  mean,
  percentile,
  progress,
  REDIS_URL,
  randomPrefix,
  round,
  userMessage,
} from '../lib/util.js';
import {
  assistantMessage,
  benchConfig,
  filler,
  limits,
  promptTokens,
  summariserModel,
  summaryText,
} from './fixtures.js';
import type { CompactionOptions } from './options.js';

/**
 * Part 2 of the compaction benchmark, one measurement: the real turn worker on seeded chats,
 * with the real compaction worker summarising the same chats (mode on) or not (mode off).
 */

export type LatencyMode = 'off' | 'on';

interface Dist {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export function dist(values: number[]): Dist {
  return {
    n: values.length,
    p50: round(percentile(values, 50), 1),
    p90: round(percentile(values, 90), 1),
    p99: round(percentile(values, 99), 1),
    max: round(Math.max(...values), 1),
    mean: round(mean(values), 1),
  };
}

export interface LatencyMeasurement {
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

export async function measureLatency(
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
            // As src/roles/worker.ts wires it.
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
