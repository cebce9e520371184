import type { Worker } from 'bullmq';
import { type Config, requireCompactionModel, requireModel } from '../shared/config.js';
import { createSenders } from '../shared/delivery/senders.js';
import { TypingIndicator } from '../shared/delivery/typing.js';
import type { EventSink } from '../shared/events.js';
import {
  type CompactionJob,
  createQueue,
  type DeliveryJob,
  enqueueCompaction,
  enqueueDelivery,
  QUEUES,
  scheduleApprovalExpiry,
  type TurnJob,
} from '../shared/jobs.js';
import type { Logger } from '../shared/logger.js';
import { createMetrics, type Metrics } from '../shared/metrics.js';
import { settleWithin } from '../shared/process/grace.js';
import { startRoleSideServer } from '../shared/process/side-server.js';
import { Opened, type Prepared, runPrepared } from '../shared/process/startup.js';
import { checkRedisPolicy, closeRedis, createRedisClient } from '../shared/redis.js';
import { RedisWatch } from '../shared/redis-watch.js';
import { replicaAcks } from '../shared/replica-acks.js';
import { DAY_MS, storeRetentionOf } from '../shared/retention.js';
import { ChatStore } from '../shared/store/chat-store.js';
import { contactBookFromConfig } from '../shared/store/contacts.js';
import { loadProviders } from '../worker/agent/providers.js';
import { checkTools } from '../worker/agent/tools/custom-tools.js';
import { compactChat } from '../worker/compaction/compact.js';
import { compactionDepsFromConfig } from '../worker/compaction/compaction-deps.js';
import { compactionThreshold } from '../worker/compaction/cut.js';
import { buildDeliveryWorker, type DeliveryParts } from '../worker/delivery/delivery-parts.js';
import { loadMcpConfig } from '../worker/mcp/mcp-config.js';
import { openExecShell } from '../worker/shell/exec-shell.js';
import { LaneArrivals } from '../worker/turn/lane-policy.js';
import { RunningTurns } from '../worker/turn/running-turns.js';
import type { TurnDeps } from '../worker/turn/turn.js';
import {
  loadCapabilities,
  readOperatorPrompt,
  type TurnParts,
  turnDepsFromConfig,
} from '../worker/turn/turn-deps.js';
import { createTurnWorker } from '../worker/turn/turn-worker.js';
import { prepareSweeper } from '../worker/upkeep/sweeper.js';

export interface WorkerHandle {
  worker: Worker<TurnJob>;
  /** The side server: /metrics, /healthz, /readyz on METRICS_PORT. */
  metricsUrl: string;
  close(): Promise<void>;
}

export interface PreparedWorker extends Prepared<WorkerHandle> {
  metricsUrl: string;
}

/** After the grace, how long stopped turns get to release their lease and fail their attempt. */
const STOP_WAIT_MS = 3000;

/**
 * What a worker is built from besides the configuration: the parts of a turn a program gave
 * in code (`startChatlane`: model, tools, stages, instructions; see TurnParts), and what the
 * process made for all its roles. Each optional.
 */
export interface WorkerParts extends Omit<TurnParts, 'metrics' | 'capabilities' | 'providers'> {
  /** The instance's metrics (default: a registry of its own). */
  metrics?: Metrics;
  /** A program's onEvent, through an EventFeed: the events this role writes. */
  events?: EventSink | undefined;
  /**
   * Deliver in this process whatever DELIVERY_IN_WORKER says (the delivery role runs here too),
   * even with no platform or signed webhook configured.
   */
  delivery?: boolean;
}

/** `@ai-sdk/mcp` (and its own copy of the provider utilities) is imported only when MCP_CONFIG is set. */
async function startMcp(
  config: Config,
  file: NonNullable<ReturnType<typeof loadMcpConfig>>,
  logger: Logger,
  metrics: Metrics,
) {
  const { McpTools } = await import('../worker/mcp/mcp-tools.js');
  const mcp = new McpTools(
    file,
    {
      toolTimeoutMs: config.MCP_TOOL_TIMEOUT_MS,
      resultMaxChars: config.MCP_RESULT_MAX_CHARS,
      reconnectMs: config.MCP_RECONNECT_MS,
      connectTimeoutMs: config.MCP_CONNECT_TIMEOUT_MS,
    },
    logger,
    (server, up) => metrics.mcpServerUp.set({ server }, up ? 1 : 0),
  );
  await mcp.start();
  return mcp;
}

/**
 * Steps 1–3 of the startup order (`../shared/process/startup.ts`): checks, connections, side server bound.
 * No job is taken until `run()`. Parts added to the worker process (more queues' workers,
 * connections to tool servers, ...) go into the matching step below.
 */
export async function prepareWorker(
  config: Config,
  logger: Logger,
  parts: WorkerParts = {},
): Promise<PreparedWorker> {
  // 1. Checks: nothing has been opened yet, so a ConfigError here needs no cleanup. A model
  // given in code takes LLM_MODEL's place (and summarises unless COMPACTION_MODEL is set).
  const { metrics: givenMetrics, delivery: deliverHere, events, ...turn } = parts;
  const given = turn.model;
  const models = given ? undefined : requireModel(config);
  const compactionModels = given && !config.COMPACTION_MODEL ? undefined : requireCompactionModel(config);
  const metrics = givenMetrics ?? createMetrics();
  // Read again by turnDepsFromConfig below; read here so a bad path stops us before any I/O
  // (not at all when the instructions are given in code).
  if (turn.instructions === undefined) readOperatorPrompt(config.SYSTEM_PROMPT_FILE);
  const mcpFile = loadMcpConfig(config.MCP_CONFIG);
  const capabilities = loadCapabilities(config, logger);
  if (turn.tools) await checkTools(turn.tools, { mcpServers: Object.keys(mcpFile?.mcpServers ?? {}) });

  // 2. Connections.
  const providers = await loadProviders(...[models, compactionModels].filter((m) => m !== undefined));
  const opened = new Opened();
  // exec_shell: the sandbox is probed once here; a host that cannot run it stops the worker.
  const shell = await opened.step(() => openExecShell(config, logger));
  if (shell) opened.add(() => shell.close());
  // BullMQ's connection (queues, the turn worker, delivery, sweeper): see autoPipelining.
  const connection = createRedisClient(config, 'worker', 'chatlane:worker', { autoPipelining: false });
  opened.add(() => closeRedis(connection));
  // The store gets a connection of its own, without BullMQ's commands (see autoPipelining in
  // shared/redis.ts): on the shared one each store call paid ~25 KB of copied commands. Its
  // own batches stay cheap, so it keeps auto-pipelining: without it a turn promoted ~10 KiB
  // less but cost ~6 % more CPU (a socket write per command; overhead bench at 2,000, 3 A/B pairs).
  const storeConnection = createRedisClient(config, 'worker', 'chatlane:worker-store');
  opened.add(() => closeRedis(storeConnection));
  // Until Redis answers nothing else is built (no queue, no BullMQ worker, each of which
  // would report every failed reconnect): one line every few seconds says what it waits for.
  const watch = new RedisWatch(config, logger);
  watch.add(connection);
  watch.add(storeConnection);
  await opened.step(() => watch.ready());
  const store = new ChatStore(storeConnection, {
    prefix: config.CHATLANE_PREFIX,
    maxEvents: config.EVENTS_MAX_LEN,
    retention: storeRetentionOf(config),
    replicaAcks: replicaAcks(config),
    events,
  });
  const turns = createQueue<TurnJob>(config.CHATLANE_PREFIX, QUEUES.turns, connection);
  const compaction = createQueue<CompactionJob>(config.CHATLANE_PREFIX, QUEUES.compaction, connection);
  const deliveries = createQueue<DeliveryJob>(config.CHATLANE_PREFIX, QUEUES.deliveries, connection);
  opened.add(() => deliveries.close());
  opened.add(() => compaction.close());
  opened.add(() => turns.close());
  // LANE_POLICY=interrupt on any channel: one Pub/Sub connection for the arrivals of this
  // process's running turns, open before the first turn so none starts unwatched.
  let arrivals: LaneArrivals | undefined;
  if (config.LANES.anyInterrupt) {
    const subscriber = createRedisClient(config, 'worker', 'chatlane:worker-arrivals', {
      autoPipelining: false,
    });
    arrivals = new LaneArrivals(subscriber, config.CHATLANE_PREFIX, logger);
    opened.add(() => arrivals!.close());
  }
  const compactionDeps = compactionDepsFromConfig(config, store, logger, {
    metrics,
    providers,
    ...(given && { model: given }),
  });
  const contacts = contactBookFromConfig(config, store);
  const running = new RunningTurns();
  // One sender registry for delivery (when it runs here) and the typing indicator.
  const senders = await opened.step(() => createSenders(config, logger));
  opened.add(() => senders.close());
  // A server that is down does not stop the worker: it runs without those tools and retries.
  const mcp = mcpFile ? await opened.step(() => startMcp(config, mcpFile, logger, metrics)) : undefined;
  if (mcp) opened.add(() => mcp.close());
  const base = turnDepsFromConfig(config, store, logger, { ...turn, metrics, capabilities, providers });
  const deps: TurnDeps = {
    running,
    ...base,
    // Each approval request gets the turn that expires it (a delayed turn job).
    ...(base.approvals && {
      approvals: {
        ...base.approvals,
        expire: (chatKey, approvalId, at) => scheduleApprovalExpiry(turns, chatKey, approvalId, at),
      },
    }),
    afterCommit: async (chatKey, historyTokens, messageBudget) => {
      if (historyTokens >= compactionThreshold(config.COMPACT_AT_TOKENS, messageBudget)) {
        await enqueueCompaction(compaction, chatKey);
      }
    },
    compactNow: (chatKey) => compactChat(compactionDeps, chatKey),
    deliver: (chatKey) => enqueueDelivery(deliveries, chatKey),
    typing: new TypingIndicator(senders, logger),
    ...(config.CONTACT_SEND === 'on' && { contacts }),
    ...(mcp && { mcp }),
    ...(shell && { shell }),
    ...(arrivals && { arrivals }),
  };
  const worker = createTurnWorker(deps, {
    prefix: config.CHATLANE_PREFIX,
    connection,
    concurrency: config.WORKER_CONCURRENCY,
    lockDurationMs: config.JOB_LOCK_MS,
    stalledIntervalMs: config.STALLED_INTERVAL_MS,
    turns,
    metrics,
    modelBackoff: { baseMs: config.MODEL_RETRY_BACKOFF_MS, maxMs: config.MODEL_RETRY_BACKOFF_MAX_MS },
  });
  opened.add(() => worker.close());
  // Delivery runs here unless the operator runs `chatlane delivery` processes instead, and only
  // when this process can send somewhere: with no platform and no signed webhook configured,
  // every delivery job it took would go back as 'no sender' (delaying the process that has
  // one) while its poll, its stall check each STALLED_INTERVAL_MS and its blocking connection
  // cost the idle worker for nothing.
  const deliversHere = deliverHere ?? (config.DELIVERY_IN_WORKER && senders.channels().length > 0);
  let delivery: DeliveryParts | undefined;
  if (deliversHere) {
    delivery = await opened.step(() =>
      buildDeliveryWorker(config, logger, connection, { senders, metrics, events }),
    );
    opened.add(() => delivery!.close());
  }
  const sweeper = await opened.step(async () => {
    await worker.waitUntilReady();
    await checkRedisPolicy(connection, logger);
    // Fleet-wide cap on running turns (= model calls), stored in Redis: see docs/scaling.md.
    if (config.TURNS_GLOBAL_CONCURRENCY === 0) await turns.removeGlobalConcurrency();
    else if (config.TURNS_GLOBAL_CONCURRENCY)
      await turns.setGlobalConcurrency(config.TURNS_GLOBAL_CONCURRENCY);
    return prepareSweeper({
      prefix: config.CHATLANE_PREFIX,
      connection,
      store,
      turns,
      deliveries,
      contacts,
      intervalMs: config.SWEEP_INTERVAL_MS,
      batch: config.SWEEP_BATCH,
      expiry: {
        ttlMs: config.CHAT_TTL_DAYS * DAY_MS,
        intervalMs: config.CHAT_EXPIRY_INTERVAL_MS,
        queues: [turns, compaction, deliveries],
      },
      logger,
    });
  });
  opened.add(() => sweeper.close());

  // 3. Listeners.
  const side = await opened.step(() =>
    startRoleSideServer(config, {
      role: 'worker',
      metrics,
      redis: connection,
      isRunning: () => worker.isRunning() && !worker.closing,
      logger,
      detail: () => ({
        model: deps.modelHealth?.status() ?? { status: 'ok' },
        models: deps.modelHealth?.models() ?? {},
        ...(mcp && { mcp: mcp.status() }),
      }),
    }),
  );
  opened.add(() => side.close());

  // 4. Run (on `run()`).
  let closing: Promise<void> | undefined;
  const handle: WorkerHandle = {
    worker,
    metricsUrl: side.url,
    close() {
      closing ??= (async () => {
        // Each step runs even if an earlier one failed. Stop fetching; running turns get
        // SHUTDOWN_GRACE_MS to finish. Then they are stopped: each aborts its model call,
        // releases its lease and fails its attempt, so BullMQ retries it on another worker
        // at once. A turn that does not stop in time keeps its job lock and lease until they
        // expire; the stall check retries it and the new fence rejects anything it writes.
        const stopped = Promise.all([
          worker.close().catch((err: unknown) => logger.warn({ err }, 'worker close failed')),
          sweeper.close(),
          delivery?.close(),
        ]);
        if (!(await settleWithin(stopped, config.SHUTDOWN_GRACE_MS))) {
          logger.warn(
            { graceMs: config.SHUTDOWN_GRACE_MS },
            'shutdown grace ran out: running turns are cut off and will be retried by another worker',
          );
          running.stopAll('worker shutting down');
          await settleWithin(stopped, STOP_WAIT_MS);
        }
        await side.close();
        await mcp?.close();
        await shell?.close();
        await arrivals?.close();
        await turns.close().catch((err: unknown) => logger.warn({ err }, 'queue close failed'));
        await compaction.close().catch((err: unknown) => logger.warn({ err }, 'queue close failed'));
        await deliveries.close().catch((err: unknown) => logger.warn({ err }, 'queue close failed'));
        // The senders are the worker's (delivery, when it ran here, only borrowed them).
        await senders.close();
        await closeRedis(connection);
        await closeRedis(storeConnection);
      })();
      return closing;
    },
  };
  let ran = false;
  return {
    metricsUrl: side.url,
    async run() {
      ran = true;
      worker.run().catch((err: unknown) => logger.error({ err }, 'turn worker stopped'));
      delivery?.run();
      await sweeper.run();
      logger.info(
        {
          concurrency: config.WORKER_CONCURRENCY,
          globalConcurrency: await turns.getGlobalConcurrency(),
          models: Object.keys(deps.modelHealth?.models() ?? {}),
          delivery: delivery
            ? { concurrency: config.DELIVERY_CONCURRENCY, channels: delivery.senders.channels() }
            : config.DELIVERY_IN_WORKER
              ? 'off: no platform or signed webhook configured in this process'
              : 'off',
          metricsUrl: side.url,
        },
        'worker started',
      );
      return handle;
    },
    close: () => (ran ? handle.close() : opened.closeAll()),
  };
}

/** Starts the turn worker: `prepareWorker` (checks, connections, side server), then run. */
export async function startWorker(
  config: Config,
  logger: Logger,
  parts?: WorkerParts,
): Promise<WorkerHandle> {
  return runPrepared(await prepareWorker(config, logger, parts));
}
