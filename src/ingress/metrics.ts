import type { Queue } from 'bullmq';
import type {
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Logger } from '../shared/logger.js';
import { type Metrics, metricsContentType, renderMetrics } from '../shared/metrics.js';

type App = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>;

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

/**
 * Adds the request-duration histogram and the message counter to every route of `app`, and
 * `GET /metrics` (registry + BullMQ's own queue metrics, read on scrape). Call on the root
 * instance before routes are registered.
 */
export function instrumentIngress(app: App, metrics: Metrics, queues: readonly Queue[]): void {
  // Callback-style hooks: on the hot path a promise per hook per request is measurable.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.method === 'POST' && INGEST_ROUTES.has(request.routeOptions.url ?? '')) {
      const outcome = resultOf(reply.statusCode, payload);
      if (outcome) metrics.messages.inc(outcome);
    }
    done(null, payload);
  });

  app.addHook('onResponse', (request, reply, done) => {
    metrics.httpRequestDuration.observe(
      {
        method: request.method,
        route: request.routeOptions.url ?? UNMATCHED,
        status: String(reply.statusCode),
      },
      reply.elapsedTime / 1000,
    );
    done();
  });

  app.get('/metrics', async (_request, reply) => {
    const text = await renderMetrics(metrics, queues);
    return reply.header('content-type', metricsContentType(metrics)).send(text);
  });
}
