import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Queue } from 'bullmq';
import { type Config, ConfigError, DEFAULT_METRICS_PORT } from '../config.js';
import { watchQueues } from '../jobs.js';
import type { Logger } from '../logger.js';
import {
  exportsQueueMetrics,
  type Metrics,
  type MetricsRole,
  metricsContentType,
  renderMetrics,
} from '../metrics.js';
import type { RedisClient } from '../redis.js';
import { bearerCheck } from '../secret.js';

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
  /** METRICS_TOKEN: set, /metrics answers only `Authorization: Bearer <it>` (probes stay open). */
  metricsToken?: string | undefined;
}

const PING_TIMEOUT_MS = 1000;

/** One answer of the side server. */
export interface SideAnswer {
  status: number;
  contentType: string;
  body: string;
}

const json = (status: number, value: unknown): SideAnswer => ({
  status,
  contentType: 'application/json; charset=utf-8',
  body: JSON.stringify(value),
});

/**
 * The side server's three routes as a function of method, URL (the query is ignored) and the
 * Authorization header. Served by plain `node:http` (see `listen`): a web framework here would
 * be the largest module set a worker loads, held in memory for three fixed GET routes.
 */
export function sideServerRoutes(
  opts: SideServerOptions,
): (method: string, url: string, authorization?: string) => Promise<SideAnswer> {
  const role = opts.role ?? 'worker';
  const detail = () => opts.detail?.() ?? {};

  async function readyz(): Promise<SideAnswer> {
    if (!opts.isRunning()) {
      return json(503, { status: 'not ready', role, reason: `${role} is not running` });
    }
    try {
      await Promise.race([
        opts.redis.ping(),
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('ping timeout')), PING_TIMEOUT_MS).unref(),
        ),
      ]);
    } catch (err) {
      return json(503, {
        status: 'not ready',
        role,
        reason: `redis is not reachable: ${(err as Error).message}`,
      });
    }
    return json(200, { status: 'ready', role, ...detail() });
  }

  async function metrics(): Promise<SideAnswer> {
    const body = await renderMetrics(opts.metrics, opts.queues ?? []);
    return { status: 200, contentType: metricsContentType(opts.metrics), body };
  }

  const metricsAuth = opts.metricsToken === undefined ? undefined : bearerCheck(opts.metricsToken);
  const routes = new Map<string, (authorization: string | undefined) => Promise<SideAnswer>>([
    ['/healthz', async () => json(200, { status: 'ok', role })],
    ['/readyz', readyz],
    [
      '/metrics',
      async (authorization) => {
        const check = metricsAuth?.(authorization) ?? 'ok';
        if (check === 'ok') return metrics();
        const message =
          check === 'missing'
            ? 'missing bearer token (Authorization: Bearer <METRICS_TOKEN>)'
            : 'wrong metrics token';
        return json(401, { error: { code: 'UNAUTHORIZED', message } });
      },
    ],
  ]);

  return async (method, url, authorization) => {
    const path = url.split('?', 1)[0] ?? url;
    const route = method === 'GET' || method === 'HEAD' ? routes.get(path) : undefined;
    if (!route) {
      return json(404, { statusCode: 404, error: 'Not Found', message: `Route ${method}:${path} not found` });
    }
    try {
      return await route(authorization);
    } catch (err) {
      opts.logger.error({ err, path }, 'side server request failed');
      return json(500, { statusCode: 500, error: 'Internal Server Error', message: (err as Error).message });
    }
  };
}

export interface SideServerHandle {
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

/** The URL to reach a bound address: an unspecified one (0.0.0.0, ::) by its loopback. */
function urlOf(address: AddressInfo): string {
  if (address.family === 'IPv6' || address.address.includes(':')) {
    return `http://[${address.address === '::' ? '::1' : address.address}]:${address.port}`;
  }
  return `http://${address.address === '0.0.0.0' ? '127.0.0.1' : address.address}:${address.port}`;
}

async function listen(opts: SideServerOptions, host: string, port: number): Promise<SideServerHandle> {
  const answer = sideServerRoutes(opts);
  const server = createServer((req, res) => {
    void answer(req.method ?? 'GET', req.url ?? '/', req.headers.authorization).then((a) => {
      res.writeHead(a.status, { 'content-type': a.contentType, 'content-length': Buffer.byteLength(a.body) });
      res.end(req.method === 'HEAD' ? undefined : a.body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  let closing: Promise<void> | undefined;
  return {
    url: urlOf(server.address() as AddressInfo),
    close() {
      // close() waits for requests in flight; idle keep-alive connections are closed now.
      closing ??= new Promise<void>((resolve) => {
        server.close((err) => {
          if (err) opts.logger.warn({ err }, 'side server close failed');
          resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
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
  config: Pick<Config, 'HOST' | 'METRICS_PORT' | 'QUEUE_METRICS' | 'CHATLANE_PREFIX' | 'METRICS_TOKEN'>,
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
    side = await startSideServer({
      ...opts,
      host: config.HOST,
      port: config.METRICS_PORT,
      queues,
      metricsToken: config.METRICS_TOKEN,
    });
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
