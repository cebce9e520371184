import type { Queue } from 'bullmq';
// prom-client's modules, not its index: the index also loads the Summary (with tdigest and
// bintrees), the Pushgateway and the cluster aggregator, none of which chatlane uses.
import Counter from 'prom-client/lib/counter.js';
import Gauge from 'prom-client/lib/gauge.js';
import Histogram from 'prom-client/lib/histogram.js';
import Registry from 'prom-client/lib/registry.js';
import { collectDefaults } from './default-metrics.js';
import type { PriceTable } from './prices.js';
import { type CallUsage, tokensByKind, USAGE_KINDS } from './usage.js';

/**
 * Prometheus metrics: one `Metrics` per chatlane instance (`createMetrics()`: what
 * `startChatlane` and so the CLI make once, shared by every role the instance runs), so two
 * instances in one process count their own work. Node's default `process_*`/`nodejs_*`
 * metrics describe the process, not an instance: they live in one registry per process
 * (`processDefaults()`), which every instance's scrape appends. Queue depth comes from BullMQ's
 * own exporter, collected on scrape (`renderMetrics`).
 */

export type TurnOutcomeLabel = 'done' | 'idle' | 'busy' | 'lost' | 'failed' | 'deferred' | 'held';
export type MessageResult = 'accepted' | 'duplicate' | 'rejected';
export type CompactionResult = 'applied' | 'conflict' | 'skipped' | 'failed';
/** One send of an outbox item: accepted, to be retried, or failed for good (item skipped). */
export type DeliveryResult = 'delivered' | 'retry' | 'failed';

export interface Metrics {
  /** This instance's chatlane_* metrics. */
  registry: Registry;
  /** The process's default metrics (`processDefaults()`), appended to every scrape; absent in tests that leave them out. */
  processRegistry?: Registry;
  httpRequestDuration: Histogram<'method' | 'route' | 'status'>;
  messages: Counter<'result' | 'reason'>;
  turnDuration: Histogram<'outcome'>;
  queueWait: Histogram<'queue'>;
  modelCallDuration: Histogram<'result'>;
  modelTokens: Counter<'model' | 'kind'>;
  modelCost: Counter<'model'>;
  modelErrors: Counter<'kind'>;
  failedMessages: Counter<'code'>;
  fenceRejections: Counter;
  deliveryFailures: Counter<'channel'>;
  platformUpdates: Counter<'platform' | 'outcome'>;
  deliveries: Counter<'channel' | 'result'>;
  deliverySendDuration: Histogram<'channel'>;
  deliveryLag: Histogram<'channel'>;
  sseClients: Gauge;
  sseMaxClients: Gauge;
  sseMaxClientsPerChat: Gauge;
  sseRefused: Counter<'limit'>;
  compactionRuns: Counter<'result'>;
  compactionTokensSaved: Counter;
  queueMetricsUp: Gauge<'queue'>;
  mcpServerUp: Gauge<'server'>;
  toolCalls: Counter<'tool' | 'result'>;
  toolApprovals: Counter<'tool' | 'outcome'>;
  toolCallDuration: Histogram<'tool'>;
  modelUp: Gauge<'model'>;
  modelFallbacks: Counter<'model'>;
}

let defaults: Registry | undefined;

/**
 * The process's default metrics (CPU, memory, event loop, GC), collected once per process
 * however many instances it runs: prom-client's collectors observe the process (a GC observer,
 * the event-loop sampler) and are never stopped, so one set serves every instance's scrape.
 */
export function processDefaults(): Registry {
  if (!defaults) {
    defaults = new Registry();
    collectDefaults(defaults);
  }
  return defaults;
}

export function createMetrics({ defaultMetrics = true }: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  return {
    registry,
    ...(defaultMetrics && { processRegistry: processDefaults() }),
    httpRequestDuration: new Histogram({
      name: 'chatlane_http_request_duration_seconds',
      help: 'HTTP request duration by route pattern (never the raw URL) and status code',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    messages: new Counter({
      name: 'chatlane_messages_total',
      help: 'Messages posted to the ingress by result (accepted, duplicate, rejected); reason = error code of a rejection',
      labelNames: ['result', 'reason'],
      registers,
    }),
    turnDuration: new Histogram({
      name: 'chatlane_turn_duration_seconds',
      help: 'Turn job duration by outcome (done, idle, busy, lost, failed, deferred = waiting for the model, held = over its daily token budget)',
      labelNames: ['outcome'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300],
      registers,
    }),
    queueWait: new Histogram({
      name: 'chatlane_queue_wait_seconds',
      help: 'Time a job waited from being added (job.timestamp) to its first start (job.processedOn)',
      labelNames: ['queue'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
      registers,
    }),
    modelCallDuration: new Histogram({
      name: 'chatlane_model_call_duration_seconds',
      help: 'One model call (one tool-loop step), from request to the end of its stream, by result (ok, error)',
      labelNames: ['result'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120],
      registers,
    }),
    modelTokens: new Counter({
      name: 'chatlane_model_tokens_total',
      help: "Tokens of this process's model calls as the provider reported them, by the model that served the call and kind: input (all input tokens, cached included), cached_input (read from the provider's prompt cache), cache_write (written to it), output (reasoning included), reasoning",
      labelNames: ['model', 'kind'],
      registers,
    }),
    modelCost: new Counter({
      name: 'chatlane_model_cost_usd_total',
      help: "USD of this process's model calls at the prices of MODEL_PRICES_FILE, by model (models the file does not list are not counted)",
      labelNames: ['model'],
      registers,
    }),
    modelErrors: new Counter({
      name: 'chatlane_model_errors_total',
      help: 'Turn attempts that failed on the model endpoint, by kind (auth, not_found, rate_limit, server, network, timeout); their messages stay pending',
      labelNames: ['kind'],
      registers,
    }),
    failedMessages: new Counter({
      name: 'chatlane_messages_failed_total',
      help: 'Messages that could not be processed, by code; each failed batch sent one notice',
      labelNames: ['code'],
      registers,
    }),
    fenceRejections: new Counter({
      name: 'chatlane_fence_rejections_total',
      help: 'Turns that lost their chat: a fenced write (commit, outbox, renew) was refused because another turn took over',
      registers,
    }),
    deliveryFailures: new Counter({
      name: 'chatlane_delivery_failures_total',
      help: 'Outbox items given up on (permanent failure or attempts exhausted; the item was skipped), by channel',
      labelNames: ['channel'],
      registers,
    }),
    platformUpdates: new Counter({
      name: 'chatlane_platform_updates_total',
      help: 'Chat platform updates (webhook or polled) by platform and outcome: accepted, duplicate, ignored (group message without a mention), unsupported (nothing chatlane stores), failed (ingest failed; the platform retries)',
      labelNames: ['platform', 'outcome'],
      registers,
    }),
    deliveries: new Counter({
      name: 'chatlane_deliveries_total',
      help: 'Sends of outbox items by channel and result (delivered, retry, failed); an item sent as several messages counts delivered once',
      labelNames: ['channel', 'result'],
      registers,
    }),
    deliverySendDuration: new Histogram({
      name: 'chatlane_delivery_send_duration_seconds',
      help: "One send of an outbox item (or of one message of it, when it is split) to its channel, until the receiver's answer",
      labelNames: ['channel'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    sseClients: new Gauge({
      name: 'chatlane_sse_clients',
      help: 'Live stream (SSE) clients connected to this ingress process',
      registers,
    }),
    sseMaxClients: new Gauge({
      name: 'chatlane_sse_max_clients',
      help: 'SSE_MAX_CLIENTS: streamed responses (live streams, /v1/ui replies and resumes) this ingress process serves at once',
      registers,
    }),
    sseMaxClientsPerChat: new Gauge({
      name: 'chatlane_sse_max_clients_per_chat',
      help: 'SSE_MAX_CLIENTS_PER_CHAT: streamed responses of one chat this ingress process serves at once',
      registers,
    }),
    sseRefused: new Counter({
      name: 'chatlane_sse_refused_total',
      help: 'Streamed responses refused at a cap: limit="process" (503 STREAM_CAPACITY) or limit="chat" (429 STREAM_LIMIT)',
      labelNames: ['limit'],
      registers,
    }),
    deliveryLag: new Histogram({
      name: 'chatlane_delivery_lag_seconds',
      help: 'From the outbox write to the receiver accepting the item, by channel',
      labelNames: ['channel'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
      registers,
    }),
    // Incremented by the compactor through recordCompactionRun().
    compactionRuns: new Counter({
      name: 'chatlane_compaction_runs_total',
      help: 'Compaction runs by result (applied, conflict, skipped, failed)',
      labelNames: ['result'],
      registers,
    }),
    compactionTokensSaved: new Counter({
      name: 'chatlane_compaction_tokens_saved_total',
      help: 'History tokens removed by applied compactions (originals minus summary)',
      registers,
    }),
    queueMetricsUp: new Gauge({
      name: 'chatlane_queue_metrics_up',
      help: '1 when the last scrape read the queue counts from Redis, 0 when it could not',
      labelNames: ['queue'],
      registers,
    }),
    mcpServerUp: new Gauge({
      name: 'chatlane_mcp_server_up',
      help: '1 while the worker is connected to the MCP server (MCP_CONFIG), 0 while it is down and being retried',
      labelNames: ['server'],
      registers,
    }),
    toolCalls: new Counter({
      name: 'chatlane_tool_calls_total',
      help: "Calls of the tools given in code (startChatlane's tools), by tool and result: ok, error (it threw, or the chat's context did not satisfy its contextSchema), timeout (past TOOL_TIMEOUT_MS); an error or timeout is a tool error the model reads",
      labelNames: ['tool', 'result'],
      registers,
    }),
    toolApprovals: new Counter({
      name: 'chatlane_tool_approvals_total',
      help: 'Tool approval requests settled, by tool and outcome: approved, denied (by a person), expired (TOOL_APPROVAL_TTL_MS), superseded (a new message came first)',
      labelNames: ['tool', 'outcome'],
      registers,
    }),
    toolCallDuration: new Histogram({
      name: 'chatlane_tool_call_duration_seconds',
      help: 'One call of a tool given in code, until its result (or error), by tool',
      labelNames: ['tool'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    modelUp: new Gauge({
      name: 'chatlane_model_up',
      help: "1 while the model (provider:model) answers this process's calls, 0 since a call failed on the endpoint (outage, auth, unknown model) until one succeeds",
      labelNames: ['model'],
      registers,
    }),
    modelFallbacks: new Counter({
      name: 'chatlane_model_fallbacks_total',
      help: 'Model calls moved to the next model of LLM_FALLBACK_MODELS because this model (provider:model) had an outage',
      labelNames: ['model'],
      registers,
    }),
  };
}

export type MetricsRole = 'ingress' | 'worker' | 'compactor' | 'delivery';

/**
 * Whether this process exports the queue-wide metrics (QUEUE_METRICS): by default only the
 * ingress, so a fleet's sum counts each queue once. Every process exports its own work.
 */
export function exportsQueueMetrics(queueMetrics: boolean | undefined, role: MetricsRole): boolean {
  return queueMetrics ?? role === 'ingress';
}

export function recordCompactionRun(metrics: Metrics, result: CompactionResult, tokensSaved = 0): void {
  metrics.compactionRuns.inc({ result });
  if (result === 'applied' && tokensSaved > 0) metrics.compactionTokensSaved.inc(tokensSaved);
}

/** One send: its result and duration; for an accepted item also the lag since its outbox write. */
export function recordDelivery(
  metrics: Metrics,
  send: { channel: string; result: DeliveryResult; seconds: number; lagSeconds?: number },
): void {
  const { channel } = send;
  metrics.deliveries.inc({ channel, result: send.result });
  metrics.deliverySendDuration.observe({ channel }, send.seconds);
  if (send.lagSeconds !== undefined) metrics.deliveryLag.observe({ channel }, Math.max(0, send.lagSeconds));
}

/** An item given up on (skipped past): permanent failure or attempts exhausted. */
export function recordDeliveryFailure(metrics: Metrics, channel: string): void {
  metrics.deliveryFailures.inc({ channel });
}

/** One call of a tool given in code: its result and duration. */
export function recordToolCall(
  metrics: Metrics,
  call: { tool: string; result: 'ok' | 'error' | 'timeout'; seconds: number },
): void {
  metrics.toolCalls.inc({ tool: call.tool, result: call.result });
  metrics.toolCallDuration.observe({ tool: call.tool }, call.seconds);
}

/** One model call: its duration and result, and for an answered call its tokens and cost. */
export function recordModelCall(
  metrics: Metrics,
  call: { seconds: number; ok: boolean; usage?: CallUsage | undefined },
  prices?: PriceTable,
): void {
  metrics.modelCallDuration.observe({ result: call.ok ? 'ok' : 'error' }, call.seconds);
  const usage = call.usage;
  if (!usage) return;
  const tokens = tokensByKind(usage);
  for (const kind of USAGE_KINDS) {
    if (tokens[kind] > 0) metrics.modelTokens.inc({ model: usage.model, kind }, tokens[kind]);
  }
  const cost = prices?.costOfCall(usage);
  if (cost !== undefined) metrics.modelCost.inc({ model: usage.model }, cost);
}

const QUEUE_SCRAPE_TIMEOUT_MS = 2000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return Promise.race([
    promise,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`timed out after ${ms}ms`)), ms).unref(),
    ),
  ]);
}

/**
 * BullMQ writes `# HELP`/`# TYPE` once per queue; the text format allows each family once,
 * with its samples together. Regroup the queues' outputs by metric family.
 */
export function mergeExpositions(texts: string[]): string {
  const families = new Map<string, { meta: string[]; samples: string[] }>();
  const family = (name: string) => {
    let f = families.get(name);
    if (!f) {
      f = { meta: [], samples: [] };
      families.set(name, f);
    }
    return f;
  };
  for (const text of texts) {
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      const meta = /^# (HELP|TYPE) (\S+)/.exec(line);
      if (meta) {
        const f = family(meta[2]!);
        if (!f.meta.some((m) => m.startsWith(`# ${meta[1]} `))) f.meta.push(line);
        continue;
      }
      if (line.startsWith('#')) continue;
      const name = /^[^{\s]+/.exec(line)?.[0];
      if (name) family(name).samples.push(line);
    }
  }
  return [...families.values()].flatMap((f) => [...f.meta, ...f.samples]).join('\n');
}

/**
 * The scrape: the registry, then each queue's depth by state from BullMQ's exporter. A queue
 * whose counts cannot be read (Redis down) is left out and `chatlane_queue_metrics_up` says so,
 * so a scrape never fails because of Redis.
 */
export async function renderMetrics(metrics: Metrics, queues: readonly Queue[] = []): Promise<string> {
  const exported = await Promise.all(
    queues.map(async (queue) => {
      try {
        const text = await withTimeout(queue.exportPrometheusMetrics(), QUEUE_SCRAPE_TIMEOUT_MS);
        metrics.queueMetricsUp.set({ queue: queue.name }, 1);
        return text;
      } catch {
        metrics.queueMetricsUp.set({ queue: queue.name }, 0);
        return '';
      }
    }),
  );
  const own = await ownMetrics(metrics);
  const merged = mergeExpositions(exported);
  return merged ? `${own}${own.endsWith('\n') ? '' : '\n'}${merged}\n` : own;
}

/** The instance's registry, then the process's default metrics. */
async function ownMetrics(metrics: Metrics): Promise<string> {
  const own = await metrics.registry.metrics();
  if (!metrics.processRegistry) return own;
  const process = await metrics.processRegistry.metrics();
  return `${own}${own.endsWith('\n') || own === '' ? '' : '\n'}${process}`;
}

export function metricsContentType(metrics: Metrics): string {
  return metrics.registry.contentType;
}
