import cors from '@fastify/cors';
import type { Queue } from 'bullmq';
import Fastify, { type FastifyError, type FastifyInstance, LogController } from 'fastify';
import fp from 'fastify-plugin';
import { Redis } from 'ioredis';
import type { ResolveAll } from '../shared/address-policy.js';
import type { TrustProxy } from '../shared/config.js';
import type { FilePolicy } from '../shared/file-parts.js';
import type { TurnJob } from '../shared/jobs.js';
import type { LanePolicies } from '../shared/lane-policy.js';
import type { Logger } from '../shared/logger.js';
import { createMetrics, type Metrics } from '../shared/metrics.js';
import type { GroupMode } from '../shared/platforms/platform.js';
import type { PlatformRuntime } from '../shared/platforms/runtime.js';
import type { PriceTable } from '../shared/prices.js';
import type { RedisClient } from '../shared/redis.js';
import { UnstorableError } from '../shared/storable.js';
import type { ChatStore } from '../shared/store/chat-store.js';
import { ContactBook } from '../shared/store/contacts.js';
import { ReplyStreams } from '../shared/store/reply-streams.js';
import { type AdminOptions, registerAdmin } from './admin.js';
import { type Approvals, createApprovals } from './approvals.js';
import { authFailures, DEFAULT_AUTH_FAILURES } from './auth-failures.js';
import { clientErrorHandler, frameworkErrors } from './client-errors.js';
import { ContactTracker } from './contacts.js';
import { ERROR_CODES, type ErrorCode, errorBody, HttpError } from './errors.js';
import { createIngest, type Ingest } from './ingest.js';
import { instrumentIngress, metricsGuard } from './metrics.js';
import { registerPlatformHandler } from './platforms/handler.js';
import { platformWebhookRoutes } from './platforms/webhook.js';
import { approvalRoutes } from './routes/approvals.js';
import { contactRoutes } from './routes/contacts.js';
import { contextRoutes } from './routes/contexts.js';
import { healthRoutes } from './routes/health.js';
import { inspectRoutes } from './routes/inspect.js';
import { memoryRoutes } from './routes/memory.js';
import { messageRoutes } from './routes/messages.js';
import { outboxRoutes } from './routes/outbox.js';
import { streamRoutes } from './routes/stream.js';
import { uiRoutes } from './routes/ui.js';
import { usageRoutes } from './routes/usage.js';
import { securityHeaders } from './security-headers.js';
import { STREAM_DEFAULTS, StreamClients, type StreamSettings } from './stream/clients.js';
import { bodyTooDeep } from './validation.js';
import { apiAuth, type WebTokenRules } from './web-token.js';
import { type GenericWebhookOptions, genericWebhookRoutes } from './webhooks/generic.js';

/** How long a slow client may take (see HTTP_*_TIMEOUT_MS in config). */
export interface HttpLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** 0 = no limit. */
  maxRequestsPerSocket?: number;
}

/**
 * Node checks connections for the two timeouts only every `connectionsCheckingInterval`
 * (30 s by default, which would let a slow client stay twice as long as configured): check
 * four times per timeout, at most once a second.
 */
function connectionsCheckingInterval(http: HttpLimits): number {
  return Math.max(10, Math.min(1000, Math.floor(Math.min(http.headersTimeoutMs, http.requestTimeoutMs) / 4)));
}

export interface IngressLimits {
  maxPendingPerChat: number;
  dedupWindowMs: number;
  bodyLimitBytes: number;
}

export interface IngressDeps {
  redis: RedisClient;
  store: ChatStore;
  turns: Queue<TurnJob>;
  limits: IngressLimits;
  /** Slow-client limits; without them Node's and Fastify's defaults apply (tests). */
  http?: HttpLimits;
  apiToken?: string | undefined;
  logger: Logger;
  /** Queues shown on the Bull Board (default: `turns` only). */
  queues?: Queue[];
  /** Queues whose queue-wide metrics /metrics exports (default: `queues`; QUEUE_METRICS). */
  metricsQueues?: Queue[];
  /** The instance's metrics (default: a registry of its own). */
  metrics?: Metrics;
  /** Bull Board credentials; without user and password the board is not mounted. */
  admin?: AdminOptions;
  /** Default: built from store, turns and limits (pass one to share it with entry points outside the app). */
  ingest?: Ingest;
  /** Signed generic webhook sources and the reply URL policy (default: none configured). */
  genericWebhooks?: GenericWebhookOptions;
  /** Live stream settings (default STREAM_DEFAULTS). */
  streams?: Partial<StreamSettings>;
  /** The contact book (default: on the store, 90 days' retention). */
  contacts?: ContactBook;
  /** Which file parts ingest accepts (default: DEFAULT_FILE_POLICY; FILE_* config). */
  files?: FilePolicy;
  /** Lane policies by channel (LANE_*; default: merge, no debounce). */
  lanes?: LanePolicies;
  /**
   * How ingest resolves the host names of URLs a user names (reply URLs, file parts) for the
   * address policy; default the system resolver. Tests map names to addresses.
   */
  resolve?: ResolveAll;
  /** MEMORY_MAX_TOKENS: the cap of a chat's memory document (default 1000). */
  memoryMaxTokens?: number;
  /**
   * Browsers (docs/streaming.md): per-chat tokens and what they must satisfy (default: a life of
   * at most a day, no aud/iss), CORS origins, how long POST /v1/ui waits.
   */
  web?: {
    tokenSecret?: string | undefined;
    tokenRules?: WebTokenRules;
    origins?: readonly string[];
    waitMs?: number;
  };
  /** Who else may read what (docs/security.md); every field has a default. */
  security?: IngressSecurity;
  /** Chat platforms (Chat SDK) this process receives from; absent: none enabled. */
  platforms?: { runtime: PlatformRuntime; groupMode: GroupMode };
  /** The usage endpoint's prices (MODEL_PRICES_FILE) and the daily budget it reports. */
  usage?: { prices?: PriceTable | undefined; dailyTokenBudget?: number };
  /** TOOL_APPROVAL_ON_MESSAGE (default supersede): whether a waiting message settles a request before its answer. */
  approvalsOnMessage?: 'supersede' | 'keep';
}

export interface IngressSecurity {
  /** METRICS_TOKEN: the bearer token of /metrics (see `metricsGuard`). */
  metricsToken?: string | undefined;
  /** TRUST_PROXY: Fastify's `trustProxy` (default false: `request.ip` is the peer). */
  trustProxy?: TrustProxy;
  /** AUTH_FAILURE_LIMIT and AUTH_FAILURE_WINDOW_MS (default 20 a minute; limit 0 = none). */
  authFailures?: { limit: number; windowMs: number };
}

export interface IngressState {
  shuttingDown: boolean;
}

/** What chatlane's routes share, under one decorator (`app.chatlane`) of the instance they are registered on. */
export interface ChatlaneIngress {
  deps: IngressDeps;
  lifecycle: IngressState;
  /** The one ingest every entry point calls (`./ingest.ts`). */
  ingest: Ingest;
  /** Where answers to tool approval requests come in (`./approvals.ts`). */
  approvals: Approvals;
  /** Live stream (SSE) clients of this process and their shared Redis reader. */
  streams: StreamClients;
  contacts: ContactBook;
  /** Reply streams (the live view of replies that /v1/ui relays). */
  replies: ReplyStreams;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** chatlane's ingress (its routes' shared state), where `ingressPlugin` is registered. */
    chatlane: ChatlaneIngress;
  }
}

/** Where and which of chatlane's routes `ingressPlugin` registers. */
export interface IngressPluginOptions {
  deps: IngressDeps;
  /** The routes' prefix ('' or e.g. '/chat': then /chat/v1/…, /chat/webhooks/…). Default ''. */
  prefix?: string;
  /** GET /healthz and /readyz. Default true. */
  health?: boolean;
  /** GET /metrics (Prometheus). Default true. */
  metrics?: boolean;
  /**
   * chatlane's 404 answer for unmatched URLs under the prefix. Default: with a prefix only, so
   * an app that mounts chatlane at its root keeps its own 404s.
   */
  notFound?: boolean;
}

const DAY_MS = 24 * 3600 * 1000;

const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_BODY_TOO_LARGE: 'BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'VALIDATION_FAILED',
};

/**
 * A dead Redis fails every request: log the first failure of a kind at once, then at most one
 * line a second with the number left out, instead of one line per request.
 */
function throttledLog(logger: Logger, intervalMs = 1000) {
  const last = new Map<string, { at: number; suppressed: number }>();
  return (code: string, cause: unknown) => {
    const now = Date.now();
    const entry = last.get(code);
    if (entry && now - entry.at < intervalMs) {
      entry.suppressed += 1;
      return;
    }
    logger.warn(
      { code, err: cause, suppressed: entry?.suppressed ?? 0 },
      'request failed: dependency unavailable',
    );
    last.set(code, { at: now, suppressed: 0 });
  };
}

/** A hop count as the function proxy-addr makes of one (Fastify's types take no number). */
function fastifyTrust(trust: TrustProxy): boolean | string[] | ((address: string, hop: number) => boolean) {
  return typeof trust === 'number' ? (_address, hop) => hop < trust : trust;
}

/**
 * App factory: no `listen` here, so tests drive it with `inject()` and the process entry
 * decides how to serve it. The server's own options are set here; the routes, their hooks
 * and error handling are `ingressPlugin`'s, which a program can register into its own app.
 */
export async function buildIngress(deps: IngressDeps) {
  const { http } = deps;
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.limits.bodyLimitBytes,
    // Per-request logs at thousands of messages a second are noise; metrics carry that.
    logController: new LogController({ disableRequestLogging: true }),
    // No pino child per request: building one cost more than the rest of our request work,
    // and the few request-scoped logs name the request id themselves.
    childLoggerFactory: (logger) => logger,
    // Message ids in paths are user data; a stable router keeps them out of logs by route.
    routerOptions: { maxParamLength: 256 },
    // Errors before any route runs, in the documented shape too.
    clientErrorHandler: clientErrorHandler(deps.logger),
    // Behind a proxy the operator names, request.ip is the client it forwarded for.
    trustProxy: fastifyTrust(deps.security?.trustProxy ?? false),
    frameworkErrors,
    ...(http && {
      requestTimeout: http.requestTimeoutMs,
      keepAliveTimeout: http.keepAliveTimeoutMs,
      ...(http.maxRequestsPerSocket ? { maxRequestsPerSocket: http.maxRequestsPerSocket } : {}),
    }),
    http: {
      // Node would answer a Host-less HTTP/1.1 request with its own empty 400; the hook below
      // answers it in our shape instead.
      requireHostHeader: false,
      // Timeouts end in 408 REQUEST_TIMEOUT through clientErrorHandler.
      ...(http && {
        headersTimeout: http.headersTimeoutMs,
        requestTimeout: http.requestTimeoutMs,
        connectionsCheckingInterval: connectionsCheckingInterval(http),
      }),
    },
  });
  await app.register(ingressPlugin, { deps, notFound: true });
  return app;
}
export type IngressApp = Awaited<ReturnType<typeof buildIngress>>;

/**
 * chatlane's routes as a Fastify plugin: `app.chatlane` on the instance it is registered on
 * (fastify-plugin), and the routes in a scope of their own under `prefix`, with their content
 * parsing, hooks (the Host check, shutdown refusal, the /v1 auth) and error handler: the app's
 * other routes see none of them.
 */
export const ingressPlugin = fp(
  async (host: FastifyInstance, options: IngressPluginOptions) => {
    // One registry for every route and stream of this ingress.
    const deps = { ...options.deps, metrics: options.deps.metrics ?? createMetrics() };
    // The ingress only reads reply streams (and asks turns to stop): length and TTL are the worker's.
    const replies = new ReplyStreams(deps.redis, {
      prefix: deps.store.prefix,
      maxEvents: deps.store.maxEvents,
      maxLen: 0,
      ttlMs: 0,
      events: deps.store.events,
    });
    const contacts =
      deps.contacts ??
      new ContactBook(deps.store, { retentionMs: 90 * DAY_MS, dedupWindowMs: deps.limits.dedupWindowMs });
    host.decorate('chatlane', {
      deps,
      lifecycle: { shuttingDown: false },
      contacts,
      replies,
      ingest: deps.ingest ?? createIngest({ ...deps, contacts: new ContactTracker(contacts) }),
      approvals: createApprovals({
        store: deps.store,
        turns: deps.turns,
        supersede: (deps.approvalsOnMessage ?? 'supersede') === 'supersede',
      }),
      streams: streamClients(deps),
    });
    // Open streams would keep the server from closing: end them first (clients resume elsewhere).
    host.addHook('preClose', async () => host.chatlane.streams.close());
    const prefix = options.prefix ?? '';
    await host.register(ingressRoutes, { ...options, deps, prefix });
  },
  { name: 'chatlane', fastify: '5.x' },
);

/** Live stream (SSE) clients over the ingress's Redis. */
function streamClients(deps: IngressDeps & { metrics: Metrics }): StreamClients {
  return new StreamClients(
    deps.redis,
    // Its own connection, for blocking reads (single Redis only; a Cluster is polled).
    () =>
      deps.redis instanceof Redis
        ? deps.redis.duplicate({
            enableOfflineQueue: true,
            maxRetriesPerRequest: null,
            // The ingress's command timeout (REDIS_COMMAND_TIMEOUT_MS, 1 s) would cut every
            // XREAD BLOCK (5 s): the cut read stays blocked in Redis and the next one queues
            // behind it, so a quiet reader timed out again and again.
            commandTimeout: undefined,
            connectionName: `chatlane:stream:${deps.store.prefix}`,
          })
        : deps.redis,
    deps.store.prefix,
    deps.logger,
    { ...STREAM_DEFAULTS, ...deps.streams },
    deps.metrics,
  );
}

/** The routes' scope (see `ingressPlugin`). */
async function ingressRoutes(
  app: FastifyInstance,
  options: IngressPluginOptions & { deps: { metrics: Metrics }; prefix: string },
) {
  const { deps, prefix } = options;
  const { metrics } = deps;
  // The body limit of the server (buildIngress) or, inside another app, of each route here.
  app.addHook('onRoute', (route) => {
    route.bodyLimit ??= deps.limits.bodyLimitBytes;
  });
  // JSON only: a text/plain body would otherwise reach the schema as a string.
  app.removeContentTypeParser('text/plain');
  // Nesting is bounded on the raw text, before anything recursive (parser, schema, stringify)
  // sees it: thousands of levels used to end in "Maximum call stack size exceeded".
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const tooDeep = bodyTooDeep(body as string);
    if (tooDeep) {
      done(tooDeep, undefined);
      return;
    }
    parseJson(request, body as string, done);
  });
  app.addHook('onRequest', (request, _reply, done) => {
    const missingHost = !request.headers.host && request.raw.httpVersion === '1.1';
    done(missingHost ? new HttpError('BAD_REQUEST', 'the Host header is missing') : undefined);
  });
  app.decorateRequest('chatlaneWebChat', undefined);
  const origins = deps.web?.origins ?? [];
  if (origins.length > 0) {
    // @fastify/cors answers an OPTIONS that is not a preflight with a text/plain 400 of its
    // own; this hook runs first and answers it in the documented shape (itself: the plugin's
    // OPTIONS route is registered before the app's error handler, so it would not apply).
    app.addHook('onRequest', (request, reply, done) => {
      const preflight = request.headers.origin && request.headers['access-control-request-method'];
      if (request.method !== 'OPTIONS' || preflight) return done();
      reply
        .code(ERROR_CODES.BAD_REQUEST)
        .send(
          errorBody(
            'BAD_REQUEST',
            'OPTIONS answers CORS preflights only: Origin and Access-Control-Request-Method are required',
          ),
        );
    });
    await app.register(cors, {
      origin: [...origins],
      methods: ['GET', 'POST'],
      allowedHeaders: ['authorization', 'content-type'],
      exposedHeaders: ['x-vercel-ai-ui-message-stream'],
      maxAge: 600,
    });
  }
  const queues = deps.queues ?? [deps.turns];
  const authOn = Boolean(deps.apiToken || deps.web?.tokenSecret);
  const trustProxy = deps.security?.trustProxy ?? false;
  const failures = await authFailures(
    app,
    {
      ...(deps.security?.authFailures ?? DEFAULT_AUTH_FAILURES),
      trustProxy: trustProxy !== false && !(Array.isArray(trustProxy) && trustProxy.length === 0),
    },
    deps.logger,
  );
  const metricsToken = deps.security?.metricsToken;
  instrumentIngress(app, metrics, deps.metricsQueues ?? queues, {
    prefix,
    route: options.metrics ?? true,
    guard: metricsGuard({ token: metricsToken, authOn, failures }),
  });
  if (authOn && metricsToken === undefined) {
    deps.logger.warn(
      '/metrics answers 401 while /v1 needs a token: set METRICS_TOKEN (at least 32 characters) and scrape with Authorization: Bearer <METRICS_TOKEN>',
    );
  }

  const logUnavailable = throttledLog(deps.logger);
  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (err instanceof HttpError) {
      if (err.statusCode >= 500 && err.cause) logUnavailable(err.code, err.cause);
      return reply.code(err.statusCode).send(errorBody(err.code, err.message));
    }
    if (err instanceof UnstorableError) {
      return reply.code(400).send(errorBody('VALIDATION_FAILED', `message: ${err.message}`));
    }
    const mapped = err.code ? FASTIFY_CODES[err.code] : undefined;
    if (mapped) {
      const message =
        mapped === 'INVALID_JSON'
          ? `request body is not valid JSON: ${err.message}`
          : mapped === 'BODY_TOO_LARGE'
            ? `request body is larger than ${deps.limits.bodyLimitBytes} bytes`
            : err.message;
      return reply.code(ERROR_CODES[mapped]).send(errorBody(mapped, message));
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(err.statusCode).send(errorBody('VALIDATION_FAILED', err.message));
    }
    request.log.error({ err, reqId: request.id, url: request.url }, 'unhandled error');
    return reply.code(500).send(errorBody('INTERNAL', 'internal error'));
  });

  if (options.notFound ?? prefix !== '') {
    app.setNotFoundHandler((request, reply) => {
      const path = request.url.split('?')[0] ?? '';
      const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
      return reply.code(404).send(errorBody('NOT_FOUND', `no route ${request.method} ${shown}`));
    });
  }

  if (options.health ?? true) await app.register(healthRoutes);
  await registerAdmin(app, queues, deps.admin ?? {}, deps.logger, failures, prefix);
  // Callback-style hooks: on the hot path a promise per hook per request is measurable.
  const refuseWhenShuttingDown = (_request: unknown, _reply: unknown, done: (err?: Error) => void) => {
    done(
      app.chatlane.lifecycle.shuttingDown
        ? new HttpError('SHUTTING_DOWN', 'ingress is shutting down')
        : undefined,
    );
  };
  await app.register(async (hooks) => {
    securityHeaders(hooks, 'api');
    hooks.addHook('onRequest', refuseWhenShuttingDown);
    await hooks.register(genericWebhookRoutes, {
      ...(deps.genericWebhooks ?? { sources: new Map(), replyPolicy: { allowHttp: false, hosts: [] } }),
      ...(deps.resolve && { resolve: deps.resolve }),
    });
    await hooks.register(platformWebhookRoutes, {
      runtime: deps.platforms?.runtime,
      metrics,
    });
  });
  if (deps.platforms) {
    registerPlatformHandler({
      runtime: deps.platforms.runtime,
      ingest: app.chatlane.ingest,
      approvals: app.chatlane.approvals,
      groupMode: deps.platforms.groupMode,
      metrics,
    });
  }
  await app.register(
    async (api) => {
      securityHeaders(api, 'api');
      api.addHook('onRequest', refuseWhenShuttingDown);
      // Auth is this scope's own hook, on its own routes: never the root's (an app that mounts
      // chatlane keeps its other routes as they are).
      if (authOn) {
        api.addHook(
          'onRequest',
          apiAuth({
            apiToken: deps.apiToken,
            webTokenSecret: deps.web?.tokenSecret,
            ...(deps.web?.tokenRules && { webTokenRules: deps.web.tokenRules }),
            failures,
            prefix,
          }),
        );
      }
      await api.register(messageRoutes);
      await api.register(outboxRoutes);
      await api.register(streamRoutes);
      await api.register(contactRoutes);
      await api.register(inspectRoutes);
      await api.register(contextRoutes);
      await api.register(memoryRoutes);
      await api.register(usageRoutes);
      await api.register(uiRoutes, { waitMs: deps.web?.waitMs ?? 600_000 });
      await api.register(approvalRoutes);
    },
    { prefix: '/v1' },
  );
}
