import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import helmet, { type HelmetOptions } from 'helmet';

/**
 * Security headers (docs/security.md, "Headers") set by helmet, in each of chatlane's own
 * scopes rather than on the root, so an app that mounts them keeps its own.
 *
 * helmet, not @fastify/helmet: the plugin builds helmet's middleware again for every request
 * (12–30 µs on this project's VM, against about 1 µs to apply one built once) behind two async
 * hooks, on the path of every ingested message. Here what helmet sets is recorded once per
 * scope and replayed by one callback hook; the headers are the same.
 *
 * The API answers JSON and event streams, never a page: nothing of it may run script, load
 * anything, or be framed (`default-src 'none'; frame-ancestors 'none'`, X-Frame-Options DENY).
 * Cross-Origin-Resource-Policy stays same-origin: it binds only no-cors loads (an <img>, a
 * <script>), not the CORS fetches of the pages on WEB_ORIGINS.
 */
const API: HelmetOptions = {
  contentSecurityPolicy: {
    useDefaults: false,
    directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] },
  },
  frameguard: { action: 'deny' },
};

/**
 * Bull Board is a page: its own scripts and styles (plus the board's Google font), its API on
 * the same origin, no framing (clickjacking an operator into retrying or deleting jobs).
 */
const BOARD: HelmetOptions = {
  contentSecurityPolicy: {
    useDefaults: false,
    directives: {
      defaultSrc: ["'self'"],
      scriptSrc: ["'self'"],
      // The board's loading screen and React's style attributes are inline.
      styleSrc: ["'self'", "'unsafe-inline'", 'https://fonts.googleapis.com'],
      fontSrc: ["'self'", 'https://fonts.gstatic.com', 'data:'],
      imgSrc: ["'self'", 'data:'],
      connectSrc: ["'self'"],
      objectSrc: ["'none'"],
      baseUri: ["'self'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
    },
  },
  frameguard: { action: 'deny' },
};

type HeaderValue = string | number | readonly string[];
type HeaderStep = { set: string; value: HeaderValue } | { remove: string };

/**
 * What helmet does to a response with these options, recorded once: its values do not depend
 * on the request (no nonces, no per-request directives), so replaying them is the same set of
 * headers without running its dozen middlewares and building the CSP string on every request.
 */
function recordHelmet(options: HelmetOptions): HeaderStep[] {
  const steps: HeaderStep[] = [];
  const res = {
    setHeader(name: string, value: HeaderValue) {
      steps.push({ set: name, value });
    },
    removeHeader(name: string) {
      steps.push({ remove: name });
    },
  };
  let failure: unknown;
  helmet(options)({} as IncomingMessage, res as unknown as ServerResponse, (err?: unknown) => {
    failure = err;
  });
  if (failure) throw failure;
  return steps;
}

/**
 * The headers of `kind` on every route of `scope` (and only there), as Fastify reply headers:
 * Fastify hands them to one `writeHead`, which writes them without the per-header bookkeeping
 * of `setHeader` on the raw response (a few KiB and µs per response, measured on the ingest
 * path). Hijacked streams (SSE, /v1/ui) carry them too: `hijackStream` writes the reply's
 * headers into its head. What helmet removes (X-Powered-By) Fastify never sets.
 */
export function securityHeaders(scope: Pick<FastifyInstance, 'addHook'>, kind: 'api' | 'board'): void {
  const headers: Record<string, string | number | string[]> = {};
  for (const step of recordHelmet(kind === 'api' ? API : BOARD)) {
    if ('set' in step)
      headers[step.set.toLowerCase()] = typeof step.value === 'object' ? [...step.value] : step.value;
    else delete headers[step.remove.toLowerCase()];
  }
  scope.addHook('onRequest', (_request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
    reply.headers(headers);
    done();
  });
}
