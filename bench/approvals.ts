import type { AddressInfo } from 'node:net';
import { customProvider, tool } from 'ai';
import { z } from 'zod';
import { buildIngress } from '../src/ingress/app.js';
import { createQueue, QUEUES, type TurnJob } from '../src/shared/jobs.js';
import { silentLogger } from '../src/shared/logger.js';
import { createMetrics } from '../src/shared/metrics.js';
import { closeRedis, createRedis } from '../src/shared/redis.js';
import { listApprovals } from '../src/shared/store/approvals.js';
import { ChatStore } from '../src/shared/store/chat-store.js';
import { turnDepsFromConfig } from '../src/worker/turn/turn-deps.js';
import { createTurnWorker } from '../src/worker/turn/turn-worker.js';
import { refundScript } from '../test/helpers/approvals.js';
import { scriptedModel } from '../test/helpers/scripted-model.js';
import { workerConfig } from '../test/helpers/worker-config.js';
import {
  adminRedis,
  deletePrefix,
  median,
  progress,
  REDIS_URL,
  randomPrefix,
  round,
  sleep,
} from './lib/util.js';

/**
 * The latency of a tool approval (docs/benchmarks.md, "Tool approval"): from the person's
 * `POST /v1/chats/:chatKey/approvals/:approvalId` to the approved tool's run, and to the turn's
 * commit that settles it. The real path in one process: the ingress (buildIngress, over HTTP),
 * the answer script and the turn's enqueue, a BullMQ turn worker (createTurnWorker with the
 * worker's own wiring) picking it up, the turn's plan (the approvals, the once record), the AI
 * SDK running the approved call, the once guard around it, the model (in-process, zero
 * latency) going on, and the fenced commit. Per answer, milliseconds of:
 * - `accepted`: the POST's 202 (stored once and the turn enqueued);
 * - `toolRan`: the approved tool's execute called (its own clock);
 * - `settled`: `approval.resolved` in the chat's events (the resumed turn committed).
 * The tool does nothing: exec_shell adds its sandbox and workspace (the workspace benchmark).
 * Each figure is the median of `answers` in a run, then the median of the runs.
 */

export interface ApprovalsBenchOptions {
  runs: number;
  /** Approvals answered per run, one chat each, one after another. */
  answers: number;
}

export const APPROVALS_DEFAULTS: ApprovalsBenchOptions = { runs: 3, answers: 30 };

type Phase = 'accepted' | 'toolRan' | 'settled';
const PHASES: Phase[] = ['accepted', 'toolRan', 'settled'];

export async function benchApprovals(opts: ApprovalsBenchOptions) {
  const perRun: Array<Record<Phase, number>> = [];
  for (let run = 0; run < opts.runs; run++) {
    progress(`approvals: run ${run + 1}/${opts.runs}`);
    perRun.push(await oneRun(opts.answers));
  }
  const medians = Object.fromEntries(PHASES.map((p) => [p, round(median(perRun.map((r) => r[p])), 2)]));
  return { unit: 'ms', answers: opts.answers, medians, perRun };
}

async function oneRun(answers: number): Promise<Record<Phase, number>> {
  const prefix = randomPrefix('bench-appr');
  const redis = adminRedis();
  const bullmq = createRedis(REDIS_URL, 'worker', 'bench:approvals', { autoPipelining: false });
  const store = new ChatStore(redis, { prefix, maxEvents: 1000 });
  const turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
  const ranAt = new Map<string, number>();
  const refund = tool({
    inputSchema: z.object({ order: z.string() }),
    execute: async ({ order }) => {
      ranAt.set(order, performance.now());
      return { refunded: order };
    },
  });
  const { model } = scriptedModel(refundScript);
  const config = workerConfig(prefix, 'http://model.invalid/v1', { TOOL_APPROVAL: 'refund=user' });
  const deps = turnDepsFromConfig(config, store, silentLogger(), {
    metrics: createMetrics({ defaultMetrics: false }),
    tools: { refund },
    providers: { 'openai-compatible': () => customProvider({ languageModels: { mock: model } }) },
  });
  const worker = createTurnWorker(deps, {
    prefix,
    connection: bullmq,
    concurrency: 8,
    lockDurationMs: 30_000,
    stalledIntervalMs: 30_000,
    turns,
  });
  void worker.run();
  const app = await buildIngress({
    redis,
    store,
    turns,
    logger: silentLogger(),
    limits: { maxPendingPerChat: 1000, dedupWindowMs: 60_000, bodyLimitBytes: 256 * 1024 },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const samples: Record<Phase, number[]> = { accepted: [], toolRan: [], settled: [] };
  try {
    for (let i = 0; i < answers; i++) {
      const chatKey = `appr-${i}`;
      const order = `o${i}`;
      await post(`${base}/v1/chats/${chatKey}/messages`, { id: `m${i}`, text: `refund ${order}` });
      const id = await until(async () => (await listApprovals(store, chatKey))[0]?.request.id);
      const eventsKey = store.keys(chatKey).events;
      const after = (await redis.xrevrange(eventsKey, '+', '-', 'COUNT', 1))[0]?.[0] ?? '0-0';
      const t0 = performance.now();
      const res = await post(`${base}/v1/chats/${chatKey}/approvals/${id}`, { approved: true });
      samples.accepted.push(performance.now() - t0);
      if (res !== 202) throw new Error(`approval answered ${res}`);
      await settledAfter(bullmq, eventsKey, after);
      samples.settled.push(performance.now() - t0);
      samples.toolRan.push(ranAt.get(order)! - t0);
    }
  } finally {
    await worker.close();
    await app.close();
    await turns.close();
    await deletePrefix(redis, prefix);
    await closeRedis(bullmq);
    await closeRedis(redis);
  }
  return Object.fromEntries(PHASES.map((p) => [p, round(median(samples[p]), 2)])) as Record<Phase, number>;
}

async function post(url: string, body: unknown): Promise<number> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

async function until<T>(fn: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('approval request never came');
    await sleep(2);
  }
}

/** Blocks on the chat's events stream until `approval.resolved` is written after `after`. */
async function settledAfter(
  redis: ReturnType<typeof createRedis>,
  key: string,
  after: string,
): Promise<void> {
  const deadline = Date.now() + 10_000;
  let cursor = after;
  while (Date.now() < deadline) {
    const got = (await redis.xread('BLOCK', 1000, 'STREAMS', key, cursor)) as Array<
      [string, Array<[string, string[]]>]
    > | null;
    for (const [, entries] of got ?? []) {
      for (const [id, fields] of entries) {
        cursor = id;
        if (fields[fields.indexOf('type') + 1] === 'approval.resolved') return;
      }
    }
  }
  throw new Error('approval.resolved never came');
}
