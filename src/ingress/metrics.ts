import type { Queue } from 'bullmq';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type Metrics, metricsContentType, renderMetrics } from '../shared/metrics.js';
import { bearerCheck } from '../shared/secret.js';
import type { AuthFailures } from './auth-failures.js';
import { HttpError } from './errors.js';

/** Routes whose outcomes `chatlane_messages_total` counts: every entry point that ingests. */
const INGEST_ROUTES: ReadonlySet<string> = new Set([
  '/v1/chats/:chatKey/messages',
  '/webhooks/generic/:source',
]);

/** Routes without a match (404s) share one label so raw URLs never become label values. */
const UNMATCHED = 'unmatched';

const STATUS = /"status":"(accepted|duplicate)"/;
const CODE = /"code":"([A-Z_]+)"/;

/**
 * The outcome the client was told, read off the serialized body with two small regexes:
 * parsing the JSON again on every request cost more than the counter is worth.
 */
function resultOf(statusCode: number, payload: unknown): { result: string; reason?: string } | undefined {
  const text = typeof payload === 'string' ? payload : '';
  if (statusCode === 202) {
    const status = STATUS.exec(text)?.[1];
    return status ? { result: status } : undefined;
  }
  if (statusCode < 400) return undefined;
  // Errors are `{ error: { code, message } }` (docs/http-api.md).
  return { result: 'rejected', reason: CODE.exec(text)?.[1] ?? `HTTP_${statusCode}` };
}

type MetricsGuard = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/** Who may read the ingress's /metrics (docs/security.md). */
export interface MetricsAccess {
  /** METRICS_TOKEN: set, /metrics answers only `Authorization: Bearer <METRICS_TOKEN>`. */
  token?: string | undefined;
  /** /v1 needs a token: then /metrics without METRICS_TOKEN answers nobody (401). */
  authOn: boolean;
  failures: AuthFailures;
}

/**
 * The onRequest check of `GET /metrics`, or undefined when it is open (no METRICS_TOKEN and /v1
 * open: development). The API token never opens it: a scraper should not hold a key that writes
 * chats. A wrong token counts as a failed authentication of the address.
 */
export function metricsGuard(access: MetricsAccess): MetricsGuard | undefined {
  const { token, authOn, failures } = access;
  if (token === undefined) {
    if (!authOn) return undefined;
    return async () => {
      throw new HttpError(
        'UNAUTHORIZED',
        '/metrics needs METRICS_TOKEN: set it on the ingress and scrape with Authorization: Bearer <METRICS_TOKEN>',
      );
    };
  }
  const check = bearerCheck(token);
  return async (request, reply) => {
    await failures.check(request, reply);
    const result = check(request.headers.authorization);
    if (result === 'ok') return;
    if (result === 'wrong') await failures.record(request);
    throw new HttpError(
      'UNAUTHORIZED',
      result === 'missing'
        ? 'missing bearer token (Authorization: Bearer <METRICS_TOKEN>)'
        : 'wrong metrics token',
    );
  };
}

/**
/**
 * Adds the request-duration histogram and the message counter to every route of `app`'s scope,
 * and (`route`, the default) `GET /metrics` (registry + BullMQ's own queue metrics, read on
 * scrape) behind `guard` (`metricsGuard`). Call on chatlane's scope before its routes are
 * registered. Routes are labelled without the scope's `prefix`, so dashboards read the same
 * wherever the routes are mounted.
 */
export function instrumentIngress(
  app: FastifyInstance,
  metrics: Metrics,
  queues: readonly Queue[],
  {
    prefix = '',
    route = true,
    guard,
  }: { prefix?: string; route?: boolean; guard?: MetricsGuard | undefined } = {},
): void {
  const routeOf = (url: string | undefined) =>
    url === undefined ? undefined : prefix && url.startsWith(prefix) ? url.slice(prefix.length) : url;
  // Callback-style hooks: on the hot path a promise per hook per request is measurable.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.method === 'POST' && INGEST_ROUTES.has(routeOf(request.routeOptions.url) ?? '')) {
      const outcome = resultOf(reply.statusCode, payload);
      if (outcome) metrics.messages.inc(outcome);
    }
    done(null, payload);
  });

  app.addHook('onResponse', (request, reply, done) => {
    metrics.httpRequestDuration.observe(
      {
        method: request.method,
        route: routeOf(request.routeOptions.url) ?? UNMATCHED,
        status: String(reply.statusCode),
      },
      reply.elapsedTime / 1000,
    );
    done();
  });

  if (!route) return;
  app.get('/metrics', guard ? { onRequest: guard } : {}, async (_request, reply) => {
    const text = await renderMetrics(metrics, queues);
    return reply.header('content-type', metricsContentType(metrics)).send(text);
  });
}
