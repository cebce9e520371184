import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { guardedLookup } from '../address-policy.js';
import { inSpan, propagationHeaders } from '../tracing/spans.js';
import { isListedHost, type ReplyUrlPolicy, replyUrlProblem } from '../webhooks/reply-url.js';
import type { StandardWebhookSource } from '../webhooks/standard.js';
import { deliveryId } from './delivery-id.js';
import type { Sender, SendRequest, SendResult } from './sender.js';

/** `route.channel` of chats that came in through a signed generic webhook with `replyTo.url`. */
export const GENERIC_CHANNEL = 'generic';

/** Client errors that a retry cannot fix: the item is given up on at once. */
const PERMANENT = new Set([400, 401, 403, 404, 405, 410, 413, 415, 422]);
const MAX_RETRY_AFTER_MS = 3600_000;

/** `Retry-After`: seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(header: string | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  const ms = /^\d+$/.test(trimmed) ? Number(trimmed) * 1000 : Date.parse(trimmed) - now;
  return Number.isFinite(ms) ? Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms)) : undefined;
}

/**
 * The JSON body a receiver gets for one outbox item. Its `id` (= the `webhook-id` header) is
 * unique across chats and the same on every redelivery of the item: the key to dedupe on.
 * `itemId` is the item's id in its chat's outbox, as `GET …/outbox` and the stream show it.
 * `from` is the sending chat of a `chat_contact_send`.
 */
export function replyBody(chatKey: string, item: SendRequest['item']): { id: string; body: string } {
  const id = deliveryId(chatKey, item.id);
  const body = JSON.stringify({
    // A tool approval request (docs/approvals.md): answer it at the approvals endpoint.
    type: item.approval ? 'approval.requested' : 'chat.reply',
    ...(item.approval && { approval: item.approval }),
    chatKey,
    id,
    itemId: item.id,
    text: item.text,
    ts: item.ts,
    ...(item.from !== undefined && { from: item.from }),
  });
  return { id, body };
}

/**
 * Replies to generic webhook sources: POSTs each outbox item to the chat's `replyTo.url`,
 * signed with the source's Standard Webhooks secrets. 2xx = accepted; 429/408/425/5xx and
 * network errors = retry (honouring Retry-After); 400/401/403/404/405/410/413/415/422 and a
 * refused URL (policy, private address) = failed for good. Redirects are not followed.
 */
export class GenericWebhookSender implements Sender {
  readonly channel = GENERIC_CHANNEL;

  constructor(
    private readonly sources: ReadonlyMap<string, StandardWebhookSource>,
    private readonly policy: ReplyUrlPolicy,
  ) {}

  async send({ chatKey, route, item, signal }: SendRequest): Promise<SendResult> {
    const source = route.source ? this.sources.get(route.source) : undefined;
    if (!source)
      return { status: 'failed', reason: `unknown generic webhook source '${route.source ?? ''}'` };
    if (!route.url) return { status: 'failed', reason: 'route has no replyTo url' };
    const problem = replyUrlProblem(route.url, this.policy);
    if (problem) return { status: 'failed', reason: `reply URL refused: ${problem}` };
    const url = new URL(route.url);
    const { id, body } = replyBody(chatKey, item);
    const headers = { 'content-type': 'application/json', ...source.sign(id, body) };
    try {
      const res = await tracedPost(url, headers, body, signal, isListedHost(url, this.policy));
      if (res.status >= 200 && res.status < 300) return { status: 'ok' };
      const reason = `HTTP ${res.status} from ${url.host}`;
      if (PERMANENT.has(res.status)) return { status: 'failed', reason };
      const afterMs = res.status === 429 || res.status === 503 ? retryAfterMs(res.retryAfter) : undefined;
      return afterMs !== undefined ? { status: 'retry', reason, afterMs } : { status: 'retry', reason };
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code === 'EPRIVATEADDRESS')
        return { status: 'failed', reason: `reply URL refused: ${e.message}` };
      return { status: 'retry', reason: `${e.code ?? 'error'}: ${e.message}` };
    }
  }
}

/**
 * `post` as an HTTP client span (tracing on; node:http has no instrumentation of ours), whose
 * context goes along (OTEL_PROPAGATORS: traceparent by default) so the receiver can continue the trace.
 */
function tracedPost(...args: Parameters<typeof post>): ReturnType<typeof post> {
  const [url, headers, ...rest] = args;
  const attributes = {
    'http.request.method': 'POST',
    'url.full': url.href,
    'server.address': url.hostname,
    'server.port': Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
  };
  return inSpan('POST', { kind: 'client', attributes }, async (span) => {
    const res = await post(url, { ...headers, ...propagationHeaders(span) }, ...rest);
    span?.setAttribute('http.response.status_code', res.status);
    return res;
  });
}

function post(
  url: URL,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
  trusted: boolean,
): Promise<{ status: number; retryAfter: string | undefined }> {
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        signal,
        // Hosts on the operator's allowlist may be private; every other host must not be.
        ...(trusted ? {} : { lookup: guardedLookup }),
      },
      (res: IncomingMessage) => {
        // Drain (and ignore) the body so the socket is reusable; only the status matters.
        res.resume();
        res.on('end', () => {
          const retryAfter = res.headers['retry-after'];
          resolve({
            status: res.statusCode ?? 0,
            retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
