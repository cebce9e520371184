import type { Queue } from 'bullmq';
import Fastify, { LogController } from 'fastify';
import { ConfigError } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import { type Metrics, metricsContentType, renderMetrics } from '../shared/metrics.js';

/**
 * The small HTTP server beside a worker (or compactor) process: `/metrics`, `/healthz` and
 * `/readyz` on METRICS_PORT. Ready = Redis answers a ping AND the BullMQ worker is running,
 * so a closing or stopped worker drops out of rotation.
 */
export interface SideServerOptions {
  metrics: Metrics;
  /** The connection whose ping decides readiness. */
  redis: { ping(): Promise<unknown> };
  /** BullMQ `worker.isRunning()` (false once closing or closed). */
  isRunning: () => boolean;
  /** Queues whose depth /metrics exports (BullMQ's own exporter, read on scrape). */
  queues?: readonly Queue[];
  logger: Logger;
  role?: string;
}

const PING_TIMEOUT_MS = 1000;

export async function buildSideServer(opts: SideServerOptions) {
  const app = Fastify({
    loggerInstance: opts.logger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  const role = opts.role ?? 'worker';

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
    return { status: 'ready', role };
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

/** Listens on host:port (port 0 = any free port). Fails loudly when the port is taken. */
export async function startSideServer(
  opts: SideServerOptions & { host: string; port: number },
): Promise<SideServerHandle> {
  const app = await buildSideServer(opts);
  let url: string;
  try {
    url = await app.listen({ host: opts.host, port: opts.port });
  } catch (err) {
    await app.close().catch(() => undefined);
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') {
      throw new ConfigError(
        `METRICS_PORT: ${opts.port} is already in use on ${opts.host}; give each process its own port (0 = any free port)`,
      );
    }
    throw new Error(
      `metrics side server could not listen on ${opts.host}:${opts.port}: ${(err as Error).message}`,
    );
  }
  let closing: Promise<void> | undefined;
  return {
    app,
    url,
    close() {
      closing ??= app.close().catch((err: unknown) => opts.logger.warn({ err }, 'side server close failed'));
      return closing;
    },
  };
}
