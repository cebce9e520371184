import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Metrics } from '../../shared/metrics.js';
import type { PlatformRuntime } from '../../shared/platforms/runtime.js';
import { newRequestScope, releaseClaims, requestScope, settleScope } from '../../shared/platforms/scope.js';
import { HttpError } from '../errors.js';
import { bodyTooDeep } from '../validation.js';
import { platformVerifyRoute } from './verify-get.js';

export const PLATFORM_WEBHOOK_ROUTE = '/webhooks/:platform';

export interface PlatformWebhookOptions {
  /** Absent: no platform is enabled (every platform answers 404). */
  runtime: PlatformRuntime | undefined;
  metrics: Metrics;
}

/**
 * `POST /webhooks/:platform`: a chat platform's webhook, handed to its Chat SDK adapter,
 * which verifies it (Telegram's secret token, Slack's signature, ...) and parses it. The
 * adapter's message handler only ingests (./handler.ts); this route answers only after every
 * piece of work the adapter started has finished (everything given to `waitUntil`), so a 2xx
 * means the message is in Redis. An ingest failure answers 5xx and the platform retries.
 *
 * Answers: platform not enabled (or polling) 404 PLATFORM_NOT_ENABLED before the body is
 * read; body nested too deep 400; the adapter's refusals mapped to the error registry
 * (401 INVALID_SIGNATURE, 400 INVALID_JSON / BAD_REQUEST); an update with no message for
 * chatlane (reaction, join, edit) 200, counted as unsupported, nothing stored; otherwise the
 * adapter's own 2xx answer (Slack's url_verification challenge needs its body).
 * `GET /webhooks/:platform` serves the platforms that check their endpoint with a GET
 * (./verify-get.ts).
 */
export async function platformWebhookRoutes(
  app: FastifyInstance,
  opts: PlatformWebhookOptions,
): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  const enabled = (request: FastifyRequest): string => {
    const name = (request.params as { platform?: string }).platform ?? '';
    const platform = opts.runtime?.platforms.get(name);
    if (!platform || platform.module.polling?.(platform.settings)) {
      throw new HttpError(
        'PLATFORM_NOT_ENABLED',
        platform
          ? `platform '${name}' runs in polling mode and takes no webhooks`
          : `platform '${name.slice(0, 64)}' is not enabled on this server`,
      );
    }
    return name;
  };

  platformVerifyRoute(app, opts.runtime, adapterRefusal);

  app.post(PLATFORM_WEBHOOK_ROUTE, {
    // Refused before the body is read: an unknown platform's payload is never buffered.
    onRequest: async (request) => {
      enabled(request);
    },
    handler: async (request, reply) => {
      const name = enabled(request);
      const runtime = opts.runtime as PlatformRuntime;
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const tooDeep = bodyTooDeep(raw.toString('utf8'));
      if (tooDeep) throw tooDeep;
      const scope = newRequestScope();
      let response: Response;
      try {
        response = await requestScope.run(scope, () =>
          runtime.chat.webhooks[name]!(toWebRequest(request, raw), {
            waitUntil: (task: Promise<unknown>) => {
              scope.tasks.push(task);
            },
          }),
        );
        await settleScope(scope);
      } finally {
        await releaseClaims(runtime.state, scope);
      }
      if (scope.errors.length > 0) {
        const first = scope.errors[0];
        if (first instanceof HttpError) throw first;
        throw new HttpError('PLATFORM_UNAVAILABLE', 'the update could not be stored; retry it', {
          cause: first,
        });
      }
      if (response.status >= 400) throw await adapterRefusal(name, response);
      if (scope.outcomes.length === 0)
        opts.metrics.platformUpdates.inc({ platform: name, outcome: 'unsupported' });
      const body = Buffer.from(await response.arrayBuffer());
      const type = response.headers.get('content-type');
      if (type) reply.header('content-type', type);
      return reply.code(response.status).send(body);
    },
  });
}

function toWebRequest(request: FastifyRequest, body: Buffer): Request {
  const headers = new Headers();
  for (const [key, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(key, v);
  }
  return new Request(`http://${request.headers.host ?? 'localhost'}${request.url}`, {
    method: 'POST',
    headers,
    body: new Uint8Array(body),
  });
}

/** The adapter's non-2xx answer in the error registry's shape. */
async function adapterRefusal(name: string, response: Response): Promise<HttpError> {
  const text = (await response.text().catch(() => '')).slice(0, 200);
  const said = text ? `: ${text}` : '';
  if (response.status === 401 || response.status === 403) {
    return new HttpError('INVALID_SIGNATURE', `the ${name} webhook could not be verified${said}`);
  }
  if (response.status >= 500)
    return new HttpError('PLATFORM_UNAVAILABLE', `the ${name} adapter is unavailable${said}`);
  if (/json/i.test(text))
    return new HttpError('INVALID_JSON', `the ${name} webhook body is not valid JSON${said}`);
  return new HttpError('BAD_REQUEST', `the ${name} adapter refused the webhook${said}`);
}
