import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { loadConfig } from '../shared/config.js';
import { EventFeed, type EventHandler } from '../shared/events.js';
import { chatKeyOfEventsKey } from '../shared/keys.js';
import { createLogger, type Logger } from '../shared/logger.js';
import { createMetrics } from '../shared/metrics.js';

/** The options of `chatlaneFastify`. Every one is optional. */
export interface ChatlaneFastifyOptions {
  /**
   * Where chatlane's routes go in your app: with `'/chat'`, its API is `/chat/v1/…` and its
   * webhooks `/chat/webhooks/…`. Default: your app's root.
   */
  prefix?: string;
  /**
   * The environment variables chatlane reads (docs/configuration.md), parsed by the same schema
   * as the CLI's; a bad value throws the `ConfigError` naming it. Default: `process.env`. The
   * server's own settings (PORT, HOST, HTTP_*_TIMEOUT_MS) are your app's to choose.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** Also serve chatlane's `GET /healthz` and `/readyz` (Redis reachable) under the prefix. Default false. */
  health?: boolean;
  /** Also serve chatlane's `GET /metrics` (Prometheus) under the prefix. Default false. */
  metrics?: boolean;
  /** A pino logger for chatlane's lines. Default: JSON lines on stdout at LOG_LEVEL, named `chatlane-ingress`. */
  logger?: Logger;
  /**
   * Called with each event the ingress writes (an operator's memory update, context switch or
   * stop: docs/events.md), as `startChatlane`'s `onEvent`. Turns' events are the worker's.
   */
  onEvent?: EventHandler;
}

/**
 * chatlane's ingress inside your own Fastify (5) app: its HTTP API (`/v1/*`) and webhooks
 * (`/webhooks/*`), optionally health and metrics, under `prefix`. Its auth (API_TOKEN,
 * browser tokens), JSON parsing, Host check and error answers apply to its routes only; your
 * other routes, hooks, parsers and 404s are left alone. It adds one decorator to your app,
 * `chatlane` (its routes' shared state). It opens its Redis connection and queues when
 * registered and closes them with your app.
 *
 * Turns run in a worker: `startChatlane({ roles: ['worker'] })` in this process or another.
 *
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { chatlaneFastify } from 'chatlane';
 *
 * const app = Fastify({ routerOptions: { maxParamLength: 256 } });
 * await app.register(chatlaneFastify, { prefix: '/chat' });
 * await app.listen({ port: 3000 });
 * ```
 */
export const chatlaneFastify: FastifyPluginAsync<ChatlaneFastifyOptions> = fp(
  async (app: FastifyInstance, options: ChatlaneFastifyOptions) => {
    const config = loadConfig(options.env);
    const logger = options.logger ?? createLogger(config.LOG_LEVEL, 'chatlane-ingress');
    // Loaded on register only: a program that never mounts the ingress loads none of it.
    const [{ openIngress }, { ingressPlugin }] = await Promise.all([
      import('../roles/ingress.js'),
      import('../ingress/app.js'),
    ]);
    const events =
      options.onEvent &&
      new EventFeed(options.onEvent, logger, (key) => chatKeyOfEventsKey(config.CHATLANE_PREFIX, key)).sink;
    const open = await openIngress(config, logger, { metrics: createMetrics(), events });
    try {
      await app.register(ingressPlugin, {
        deps: open.deps,
        prefix: options.prefix ?? '',
        health: options.health ?? false,
        metrics: options.metrics ?? false,
      });
    } catch (err) {
      await open.close();
      throw err;
    }
    // Polling takes work: only once the app is ready to serve.
    app.addHook('onReady', async () => open.startPollers());
    // Refuse new work while the app drains (503 SHUTTING_DOWN), as the standalone ingress does.
    app.addHook('preClose', async () => {
      app.chatlane.lifecycle.shuttingDown = true;
    });
    app.addHook('onClose', async () => open.close());
  },
  { name: 'chatlane-ingress', fastify: '5.x' },
);
