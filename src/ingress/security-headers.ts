import helmet, { type FastifyHelmetOptions } from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';

/**
 * Security headers (docs/security.md, "Headers") through @fastify/helmet, registered in each of
 * chatlane's own scopes rather than on the root, so an app that mounts them keeps its own.
 *
 * The API answers JSON and event streams, never a page: nothing of it may run script, load
 * anything, or be framed (`default-src 'none'; frame-ancestors 'none'`, X-Frame-Options DENY).
 * Cross-Origin-Resource-Policy stays same-origin: it binds only no-cors loads (an <img>, a
 * <script>), not the CORS fetches of the pages on WEB_ORIGINS.
 */
const API: FastifyHelmetOptions = {
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
const BOARD: FastifyHelmetOptions = {
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

/** The headers of `kind` on every route of `scope` (and only there). */
export async function securityHeaders(scope: FastifyInstance, kind: 'api' | 'board'): Promise<void> {
  await scope.register(helmet, kind === 'api' ? API : BOARD);
}
