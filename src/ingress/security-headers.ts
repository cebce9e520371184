import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import helmet, { type HelmetOptions } from 'helmet';

/**
 * Security headers (docs/security.md, "Headers") set by helmet, in each of chatlane's own
 * scopes rather than on the root, so an app that mounts them keeps its own.
 *
 * helmet, not @fastify/helmet: the plugin builds helmet's middleware again for every request
 * (12–30 µs on this project's VM, against about 1 µs to apply one built once) behind two async
 * hooks, on the path of every ingested message. The middleware is built once per scope here
 * and applied by one callback hook; the headers are the same.
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

/**
 * The headers of `kind` on every route of `scope` (and only there). They are set on the raw
 * response, so hijacked streams (SSE, /v1/ui) carry them too.
 */
export function securityHeaders(scope: Pick<FastifyInstance, 'addHook'>, kind: 'api' | 'board'): void {
  const set = helmet(kind === 'api' ? API : BOARD);
  scope.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
    set(request.raw, reply.raw, (err?: unknown) => done(err as Error | undefined));
  });
}
