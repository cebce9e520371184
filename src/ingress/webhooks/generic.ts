import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { type ResolveAll, resolvedHostProblem } from '../../shared/address-policy.js';
import { chatKeySchema } from '../../shared/chat-key.js';
import { GENERIC_CHANNEL } from '../../shared/delivery/generic-sender.js';
import type { ReplyRoute } from '../../shared/delivery/route.js';
import { WebhookIds } from '../../shared/store/webhook-ids.js';
import { type ReplyUrlPolicy, replyUrlProblem } from '../../shared/webhooks/reply-url.js';
import { type StandardWebhookSource, TOLERANCE_SECONDS } from '../../shared/webhooks/standard.js';
import { HttpError } from '../errors.js';
import { contentFields, hasTextOrParts, TEXT_OR_PARTS, toUserMessage } from '../user-message.js';
import { bodyTooDeep, parseOrThrow, withRedis } from '../validation.js';

export interface GenericWebhookOptions {
  sources: ReadonlyMap<string, StandardWebhookSource>;
  replyPolicy: ReplyUrlPolicy;
  /** How reply URL hosts are resolved at ingest (default: the system resolver). */
  resolve?: ResolveAll;
}

/** The route whose outcomes `chatlane_messages_total` counts beside the HTTP API's. */
export const GENERIC_WEBHOOK_ROUTE = '/webhooks/generic/:source';

const WEBHOOK_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

export const genericWebhookBody = z
  .object({
    chatKey: chatKeySchema,
    ...contentFields,
    user: z
      .object({ id: z.string().min(1).max(200).optional(), name: z.string().min(1).max(200).optional() })
      .strict()
      .optional(),
    replyTo: z
      .object({ url: z.string().max(2048) })
      .strict()
      .optional(),
  })
  .strict()
  .refine(hasTextOrParts, TEXT_OR_PARTS);

/**
 * A body declared as anything but `application/json` (parameters such as `; charset=utf-8`
 * allowed). A body without a content-type is taken: the signature, not the header, says what
 * it is, and some senders leave the header out.
 */
function declaredNotJson(contentType: string | undefined): boolean {
  const declared = contentType?.trim() ?? '';
  return declared !== '' && !/^application\/json\s*(;|$)/i.test(declared);
}

/**
 * `POST /webhooks/generic/:source`: a user's own system (CRM, support form, app backend)
 * pushes a message in, signed with the Standard Webhooks scheme. Order of checks, each
 * refusing before anything is written: unknown source (404) and a body declared as other than
 * `application/json` (415), both before the body is read → signature over the raw bytes
 * (401) → JSON (400) → body schema (400) → reply URL policy (400) → the shared ingest.
 * `webhook-id` is the idempotency key, per source as Standard Webhooks means it: a replay
 * with a valid signature is answered `duplicate` and stores nothing new, whichever chatKey it
 * names (a replay outside the tolerance fails the timestamp check, 401).
 *
 * The raw body parser is registered in this plugin only, so the JSON API keeps Fastify's
 * own parser.
 */
export async function genericWebhookRoutes(app: FastifyInstance, opts: GenericWebhookOptions): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  const webhookIds = new WebhookIds(
    app.chatlane.deps.redis,
    app.chatlane.deps.store.prefix,
    app.chatlane.deps.limits.dedupWindowMs,
  );

  const sourceOf = (request: FastifyRequest): StandardWebhookSource => {
    const name = (request.params as { source?: string }).source ?? '';
    const source = opts.sources.get(name);
    if (!source)
      throw new HttpError('UNKNOWN_SOURCE', `no generic webhook source '${name.slice(0, 64)}' is configured`);
    return source;
  };

  app.post(GENERIC_WEBHOOK_ROUTE, {
    // Refused before the body is read: an unknown source's or a non-JSON payload is never buffered.
    onRequest: async (request: FastifyRequest) => {
      sourceOf(request);
      if (declaredNotJson(request.headers['content-type'])) {
        throw new HttpError('UNSUPPORTED_MEDIA_TYPE', 'content-type must be application/json');
      }
    },
    handler: async (request, reply) => {
      const source = sourceOf(request);
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const failure = source.verify(raw, request.headers);
      if (failure === 'timestamp') {
        throw new HttpError(
          'TIMESTAMP_OUT_OF_TOLERANCE',
          `webhook-timestamp is more than ${TOLERANCE_SECONDS / 60} minutes away from the server's clock`,
        );
      }
      if (failure === 'missing-headers') {
        throw new HttpError(
          'INVALID_SIGNATURE',
          'webhook-id, webhook-timestamp and webhook-signature headers are required',
        );
      }
      if (failure)
        throw new HttpError('INVALID_SIGNATURE', `no signature matches a secret of source '${source.name}'`);

      const webhookId = String(request.headers['webhook-id']);
      if (!WEBHOOK_ID.test(webhookId)) {
        throw new HttpError('VALIDATION_FAILED', 'webhook-id must be 1-128 characters of [A-Za-z0-9._:@-]');
      }
      const text = raw.toString('utf8');
      const tooDeep = bodyTooDeep(text);
      if (tooDeep) throw tooDeep;
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch (err) {
        throw new HttpError('INVALID_JSON', `request body is not valid JSON: ${(err as Error).message}`);
      }
      const body = parseOrThrow(genericWebhookBody, json, 'body');
      let route: ReplyRoute | undefined;
      if (body.replyTo) {
        const problem =
          replyUrlProblem(body.replyTo.url, opts.replyPolicy) ??
          // An allowlist names every host it accepts, resolved or not; without one the name
          // must resolve to public addresses only.
          (opts.replyPolicy.hosts.length === 0
            ? await resolvedHostProblem(new URL(body.replyTo.url).hostname, opts.resolve)
            : undefined);
        if (problem) throw new HttpError('REPLY_URL_NOT_ALLOWED', `replyTo.url: ${problem}`);
        route = { channel: GENERIC_CHANNEL, source: source.name, url: body.replyTo.url };
      }
      const message = toUserMessage(
        body.chatKey,
        {
          // Scoped by source: two sources may use the same ids.
          id: `${source.name}:${webhookId}`,
          ...(body.text !== undefined && { text: body.text }),
          ...(body.parts !== undefined && { parts: body.parts }),
          metadata: {
            channel: GENERIC_CHANNEL,
            ...(body.user?.id !== undefined && { userId: body.user.id }),
            ...(body.user?.name !== undefined && { username: body.user.name }),
            extra: { source: source.name, webhookId },
          },
        },
        Date.now(),
      );
      // Claimed last, once everything that can refuse without storing has passed.
      const claim = await withRedis(() => webhookIds.claim(source.name, webhookId, body.chatKey));
      if (claim.status === 'other') {
        return reply.code(202).send({ chatKey: claim.chatKey, messageId: message.id, status: 'duplicate' });
      }
      let result: Awaited<ReturnType<typeof app.chatlane.ingest>>;
      try {
        result = await app.chatlane.ingest({ chatKey: body.chatKey, message, ...(route && { route }) });
      } catch (err) {
        // Not stored: the claim goes, so a refusal leaves nothing and a retry is judged afresh.
        if (claim.status === 'new') {
          await webhookIds.release(source.name, webhookId, body.chatKey).catch(() => undefined);
        }
        throw err;
      }
      return reply
        .code(202)
        .send({ chatKey: body.chatKey, messageId: result.messageId, status: result.status });
    },
  });
}
