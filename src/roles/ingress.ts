import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { hostname } from 'node:os';
import { apiAccessOf } from '../ingress/api-access.js';
import { buildIngress, type IngressApp, type IngressDeps } from '../ingress/app.js';
import { startPollers } from '../ingress/platforms/poller.js';
import type { Queue } from '../shared/bullmq.js';
import { type Config, ConfigError, filePolicy } from '../shared/config.js';
import { replyUrlPolicy } from '../shared/delivery/senders.js';
import type { EventSink } from '../shared/events.js';
import { createQueue, QUEUES, type TurnJob } from '../shared/jobs.js';
import type { Logger } from '../shared/logger.js';
import { createMetrics, exportsQueueMetrics, type Metrics } from '../shared/metrics.js';
import { type PlatformRuntime, startPlatformRuntime } from '../shared/platforms/runtime.js';
import { Opened } from '../shared/process/startup.js';
import { readyQueue } from '../shared/ready-queue.js';
import { checkRedisPolicy, closeRedis, createRedisClient, type RedisClient } from '../shared/redis.js';
import { RedisWatch } from '../shared/redis-watch.js';
import { replicaAcks } from '../shared/replica-acks.js';
import { storeRetentionOf } from '../shared/retention.js';
import { ChatStore } from '../shared/store/chat-store.js';
import { standardSources } from '../shared/webhooks/standard.js';

export interface IngressHandle {
  app: IngressApp;
  url: string;
  close(): Promise<void>;
}

/** How long an ingress's start waits for Redis to answer before it gives up. */
const REDIS_START_TIMEOUT_MS = 10_000;

/** How long a start may wait for BullMQ to set a queue's connection up (readyQueue). */
const QUEUE_SETUP_TIMEOUT_MS = 30_000;

/**
 * An ingress's connections and what its routes are built from, before any HTTP server: the
 * standalone ingress (`startIngress`) and the Fastify plugin (`chatlaneFastify`) serve the
 * same routes over it. `close()` releases every connection it opened, and runs even when the
 * opening failed half way (then it is called by `openIngress` itself).
 */
export interface OpenIngress {
  deps: IngressDeps;
  /** Starts the platforms' pollers (work-taking: only once the routes are served). */
  startPollers(): void;
  close(): Promise<void>;
}

export async function openIngress(
  config: Config,
  logger: Logger,
  { metrics = createMetrics(), events }: { metrics?: Metrics; events?: EventSink | undefined } = {},
): Promise<OpenIngress> {
  // Before anything connects or binds: an ingress that would serve an open API in production stops here.
  const access = apiAccessOf(config);
  if (access.open) logger.warn(access.warning);
  const opened = new Opened();
  const redis = createRedisClient(config, 'ingress', 'chatlane:ingress');
  opened.add(() => closeRedis(redis));
  const watch = new RedisWatch(config, logger);
  watch.add(redis);
  // BullMQ defines its ~60 Lua commands on its queues' connection, and ioredis copies them
  // onto every auto-pipeline batch that connection builds: garbage on every message. The
  // queues get a connection of their own without auto-pipelining (as the worker's BullMQ
  // connection), the same fail-fast options. With REDIS_REPLICA_ACKS they stay on the
  // store's: its one WAIT covers the message and the job add only if both went through it.
  const acks = replicaAcks(config);
  const queueRedis = acks
    ? redis
    : createRedisClient(config, 'ingress', 'chatlane:ingress:queues', { autoPipelining: false });
  if (queueRedis !== redis) {
    opened.add(() => closeRedis(queueRedis));
    watch.add(queueRedis);
  }
  const { store, queues, platforms } = await opened.step(async () => {
    // An ingress that cannot reach Redis stops (a program's start throws) rather than wait.
    await watch.ready({ timeoutMs: REDIS_START_TIMEOUT_MS });
    await checkRedisPolicy(redis, logger);
    const store = new ChatStore(redis, {
      prefix: config.CHATLANE_PREFIX,
      maxEvents: config.EVENTS_MAX_LEN,
      retention: storeRetentionOf(config),
      replicaAcks: acks,
      events,
    });
    const ready = async <Q extends Queue>(build: () => Q) => {
      const queue = await readyQueue(build, { timeoutMs: QUEUE_SETUP_TIMEOUT_MS, logger });
      opened.add(() => queue.close().catch(() => undefined));
      return queue;
    };
    const turns = await ready(() => createQueue<TurnJob>(config.CHATLANE_PREFIX, QUEUES.turns, queueRedis));
    // Only watched (Bull Board, /metrics): their producers and consumers live elsewhere.
    const watched = await Promise.all(
      Object.values(QUEUES)
        .filter((name) => name !== QUEUES.turns)
        .map((name) => ready(() => createQueue(config.CHATLANE_PREFIX, name, queueRedis))),
    );
    const platforms = await startPlatforms(config, redis, logger);
    if (platforms) opened.add(() => platforms.close());
    return { store, queues: { turns, all: [turns, ...watched] }, platforms };
  });
  const deps: IngressDeps = {
    redis,
    store,
    turns: queues.turns,
    apiToken: config.API_TOKEN,
    web: {
      tokenSecret: config.WEB_TOKEN_SECRET,
      tokenRules: {
        maxTtlS: config.WEB_TOKEN_MAX_TTL_S,
        audience: config.WEB_TOKEN_AUDIENCE,
        issuer: config.WEB_TOKEN_ISSUER,
      },
      origins: config.WEB_ORIGINS,
      waitMs: config.UI_WAIT_MS,
    },
    security: {
      metricsToken: config.METRICS_TOKEN,
      trustProxy: config.TRUST_PROXY,
      authFailures: { limit: config.AUTH_FAILURE_LIMIT, windowMs: config.AUTH_FAILURE_WINDOW_MS },
    },
    logger,
    metrics,
    queues: queues.all,
    metricsQueues: exportsQueueMetrics(config.QUEUE_METRICS, 'ingress') ? queues.all : [],
    admin: { user: config.ADMIN_USER, password: config.ADMIN_PASSWORD, readOnly: config.ADMIN_READ_ONLY },
    genericWebhooks: {
      sources: standardSources(config.GENERIC_WEBHOOKS),
      replyPolicy: replyUrlPolicy(config),
    },
    ...(platforms && { platforms: { runtime: platforms, groupMode: config.GROUP_MODE } }),
    http: {
      headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      maxRequestsPerSocket: config.HTTP_MAX_REQUESTS_PER_SOCKET,
    },
    files: filePolicy(config),
    lanes: config.LANES,
    streams: {
      heartbeatMs: config.SSE_HEARTBEAT_MS,
      maxClients: config.SSE_MAX_CLIENTS,
      maxClientsPerChat: config.SSE_MAX_CLIENTS_PER_CHAT,
      pollMs: config.SSE_POLL_MS,
      pollMaxMs: config.SSE_POLL_MAX_MS,
    },
    memoryMaxTokens: config.MEMORY_MAX_TOKENS,
    usage: { prices: config.MODEL_PRICES, dailyTokenBudget: config.CHAT_DAILY_TOKEN_BUDGET },
    approvalsOnMessage: config.TOOL_APPROVAL_ON_MESSAGE,
    limits: {
      maxPendingPerChat: config.MAX_PENDING_PER_CHAT,
      dedupWindowMs: config.DEDUP_WINDOW_MS,
      bodyLimitBytes: config.BODY_LIMIT_BYTES,
    },
  };
  let pollers: { close(): Promise<void> } | undefined;
  let closing: Promise<void> | undefined;
  return {
    deps,
    startPollers() {
      pollers ??=
        platforms &&
        startPollers({
          runtime: platforms,
          redis,
          prefix: config.CHATLANE_PREFIX,
          leaseMs: config.POLLER_LEASE_MS,
          holder: `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`,
          logger,
        });
    },
    close() {
      closing ??= (async () => {
        await pollers?.close().catch((err: unknown) => logger.warn({ err }, 'pollers close failed'));
        // Newest first: the platforms, the queues, then the connections.
        await opened.closeAll();
      })();
      return closing;
    },
  };
}

export async function startIngress(
  config: Config,
  logger: Logger,
  parts: { metrics?: Metrics; events?: EventSink | undefined } = {},
): Promise<IngressHandle> {
  const open = await openIngress(config, logger, parts);
  let app: IngressApp;
  let url: string;
  try {
    app = await buildIngress(open.deps);
  } catch (err) {
    await open.close();
    throw err;
  }
  try {
    url = await app.listen({ host: config.HOST, port: config.PORT });
  } catch (err) {
    await app.close().catch(() => undefined);
    await open.close();
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new ConfigError(
        `PORT: ${config.PORT} is already in use on ${config.HOST}; give each ingress on this host its own port`,
      );
    }
    throw err;
  }
  logger.info({ url }, 'ingress listening');
  // Polling takes work, so it starts only once the port is bound (startup order).
  open.startPollers();

  // Sockets that have not sent a request yet (a browser's preconnect, a pool's spare):
  // Node's closeIdleConnections leaves them open, as their request may be on its way, so a
  // closing server would wait for the client to drop them (up to its keep-alive timeout).
  const unused = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    unused.add(socket);
    socket.once('close', () => unused.delete(socket));
  });
  app.server.on('request', (request: IncomingMessage) => unused.delete(request.socket));

  let closing: Promise<void> | undefined;
  return {
    app,
    url,
    close() {
      closing ??= (async () => {
        // Refuse new work first (503), let in-flight requests finish, then drop connections.
        app.chatlane.lifecycle.shuttingDown = true;
        // A keep-alive connection whose request was in flight turns idle once answered, and
        // nothing else would close it until the client does: close idle ones as they appear.
        // A socket without a request by now would only be answered 503: it is dropped.
        const closeIdle = setInterval(() => {
          app.server.closeIdleConnections();
          for (const socket of unused) socket.destroy();
        }, 100);
        await app.close().catch((err: unknown) => logger.warn({ err }, 'http close failed'));
        clearInterval(closeIdle);
        await open.close();
      })();
      return closing;
    },
  };
}

/**
 * The Chat SDK runtime over the platforms the environment enables (config.ts has already
 * refused a half-configured one), initialized before the port is bound; logs which are on.
 */
async function startPlatforms(
  config: Config,
  redis: RedisClient,
  logger: Logger,
): Promise<PlatformRuntime | undefined> {
  const enabled = Object.fromEntries(
    config.PLATFORMS.map((p) => [p.module.name, p.module.describe(p.settings)]),
  );
  logger.info(
    { platforms: enabled, groupMode: config.GROUP_MODE },
    config.PLATFORMS.length > 0
      ? `platforms enabled: ${Object.keys(enabled).join(', ')}`
      : 'platforms enabled: none',
  );
  return config.PLATFORMS.length === 0 ? undefined : startPlatformRuntime(config, redis, logger);
}
