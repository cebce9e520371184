import type { Queue } from 'bullmq';
import Fastify, { LogController } from 'fastify';
import { type Config, ConfigError, DEFAULT_METRICS_PORT } from '../shared/config.js';
import { watchQueues } from '../shared/jobs.js';
import type { Logger } from '../shared/logger.js';
import {
  exportsQueueMetrics,
  type Metrics,
  type MetricsRole,
  metricsContentType,
  renderMetrics,
} from '../shared/metrics.js';
import type { RedisClient } from '../shared/redis.js';

/**
 * The small HTTP server beside a worker (or compactor) process: `/metrics`, `/healthz` and
 * `/readyz` on METRICS_PORT (see `startSideServer` for how the port is chosen). Ready = Redis answers a ping AND the BullMQ worker is running,
 * so a closing or stopped worker drops out of rotation. A failing model endpoint is reported
 * in the detail (`model`) but keeps the answer 200: the worker is fine, the endpoint is shared
 * by the whole fleet, and restarting workers would not bring it back.
 */
export interface SideServerOptions {
  metrics: Metrics;
  /** The connection whose ping decides readiness. */
  redis: { ping(): Promise<unknown> };
  /** BullMQ `worker.isRunning()` (false once closing or closed). */
  isRunning: () => boolean;
  /** Queues whose queue-wide metrics /metrics exports (BullMQ's own exporter, read on scrape). */
  queues?: readonly Queue[];
  logger: Logger;
  role?: string;
  /** Extra state shown in /readyz without deciding readiness (e.g. MCP servers that are down). */
  detail?: () => Record<string, unknown>;
}

const PING_TIMEOUT_MS = 1000;

export async function buildSideServer(opts: SideServerOptions) {
  const app = Fastify({
    loggerInstance: opts.logger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  const role = opts.role ?? 'worker';
  const detail = () => opts.detail?.() ?? {};

  app.get('/healthz', async () => ({ status: 'ok', role }));

  app.get('/readyz', async (_request, reply) => {
    if (!opts.isRunning()) {
      return reply.code(503).send({ status: 'not ready', role, reason: `${role} is not running` });
    }
    try {
      await Promise.race([
        opts.redis.ping(),
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('ping timeout')), PING_TIMEOUT_MS).unref(),
        ),
      ]);
    } catch (err) {
      return reply
        .code(503)
        .send({ status: 'not ready', role, reason: `redis is not reachable: ${(err as Error).message}` });
    }
    return { status: 'ready', role, ...detail() };
  });

  app.get('/metrics', async (_request, reply) => {
    const text = await renderMetrics(opts.metrics, opts.queues ?? []);
    return reply.header('content-type', metricsContentType(opts.metrics)).send(text);
  });

  return app;
}
export type SideServerApp = Awaited<ReturnType<typeof buildSideServer>>;

export interface SideServerHandle {
  app: SideServerApp;
  url: string;
  close(): Promise<void>;
}

export interface SideServerListen {
  host: string;
  /** METRICS_PORT as configured: a number is exact (0 = any free port); undefined = `defaultPort` if free, else any. */
  port: number | undefined;
  /** Tried first when `port` is unset. */
  defaultPort?: number;
}

const isAddressInUse = (err: unknown) => (err as NodeJS.ErrnoException).code === 'EADDRINUSE';

async function listen(opts: SideServerOptions, host: string, port: number): Promise<SideServerHandle> {
  const app = await buildSideServer(opts);
  try {
    const url = await app.listen({ host, port });
    let closing: Promise<void> | undefined;
    return {
      app,
      url,
      close() {
        closing ??= app
          .close()
          .catch((err: unknown) => opts.logger.warn({ err }, 'side server close failed'));
        return closing;
      },
    };
  } catch (err) {
    await app.close().catch(() => undefined);
    throw err;
  }
}

/**
 * Binds the side server. An explicit METRICS_PORT is taken as given and a taken one stops
 * the process (ConfigError naming the variable): the operator asked for that port. Unset,
 * it takes DEFAULT_METRICS_PORT when free and any free port otherwise, so several workers
 * and compactors start side by side on one host with the default environment; the URL is
 * returned (and logged by the caller as `metricsUrl`).
 */
export async function startSideServer(opts: SideServerOptions & SideServerListen): Promise<SideServerHandle> {
  const { host, port, defaultPort = DEFAULT_METRICS_PORT } = opts;
  try {
    if (port !== undefined) return await listen(opts, host, port);
    try {
      return await listen(opts, host, defaultPort);
    } catch (err) {
      if (!isAddressInUse(err)) throw err;
      return await listen(opts, host, 0);
    }
  } catch (err) {
    if (isAddressInUse(err)) {
      throw new ConfigError(
        `METRICS_PORT: ${port} is already in use on ${host}; give each process its own port, or leave METRICS_PORT unset (or 0) to take a free one`,
      );
    }
    throw new Error(
      `metrics side server could not listen on ${host}:${port ?? defaultPort}: ${(err as Error).message}`,
    );
  }
}

/**
 * The side server of a worker or compactor process, from its configuration: HOST and
 * METRICS_PORT, and the queue-wide metrics of every queue only when QUEUE_METRICS makes this
 * process their exporter (by default the ingress is, so a fleet's sums count each queue once).
 */
export async function startRoleSideServer(
  config: Pick<Config, 'HOST' | 'METRICS_PORT' | 'QUEUE_METRICS' | 'CHATLANE_PREFIX'>,
  opts: Pick<SideServerOptions, 'metrics' | 'isRunning' | 'logger' | 'detail'> & {
    role: Exclude<MetricsRole, 'ingress'>;
    redis: RedisClient;
  },
): Promise<SideServerHandle> {
  const queues = exportsQueueMetrics(config.QUEUE_METRICS, opts.role)
    ? watchQueues(config.CHATLANE_PREFIX, opts.redis)
    : [];
  const closeQueues = () => Promise.all(queues.map((q) => q.close().catch(() => undefined)));
  let side: SideServerHandle;
  try {
    side = await startSideServer({ ...opts, host: config.HOST, port: config.METRICS_PORT, queues });
  } catch (err) {
    await closeQueues();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    ...side,
    close() {
      closing ??= side.close().then(async () => {
        await closeQueues();
      });
      return closing;
    },
  };
}
