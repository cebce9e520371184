import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { int, optionalString } from './config-values.js';

/**
 * Who may call the ingress (docs/security.md): the variables of the access rules, parsed in
 * config.ts like every other (the rule itself is ingress/api-access.ts). Built per call, like
 * the rest of the schema: it is parsed once at boot and dropped.
 */

/** A secret variable of at least `min` characters; blank = unset. */
export const secretOf = (min: number) =>
  optionalString.pipe(z.string().min(min, `must be at least ${min} characters`).optional());

/**
 * TRUST_PROXY as Fastify's `trustProxy` takes it: `true` (every hop), a hop count, or the
 * addresses and CIDR ranges of the proxies; unset or `false`: no proxy is trusted.
 */
export type TrustProxy = boolean | number | string[];

const trustProxy = z
  .string()
  .optional()
  .transform((v, ctx): TrustProxy => {
    const text = v?.trim() ?? '';
    if (text === '' || text === 'false') return false;
    if (text === 'true') return true;
    if (/^\d+$/.test(text)) {
      const hops = Number(text);
      if (hops >= 1 && hops <= 16) return hops;
      ctx.addIssue({ code: 'custom', message: 'a hop count must be 1-16' });
      return z.NEVER;
    }
    const items = text
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    for (const item of items) {
      if (!ipaddr.isValid(item) && !ipaddr.isValidCIDR(item))
        ctx.addIssue({
          code: 'custom',
          message: `'${item}' is not an address or CIDR range (true, a hop count, or a list of the proxies' addresses)`,
        });
    }
    return items;
  });

/** Placed after ADMIN_READ_ONLY in the schema: the switches of the ingress's access rules. */
export const accessShape = () => ({
  NODE_ENV: optionalString.describe(
    'production makes an ingress (ingress, all) refuse to start while /v1 would be open: without API_TOKEN or WEB_TOKEN_SECRET and without API_AUTH=none',
  ),
  API_AUTH: z
    .enum(['token', 'none'])
    .optional()
    .describe(
      'token: /v1 needs a bearer token, and an ingress without API_TOKEN or WEB_TOKEN_SECRET refuses to start; none: /v1 is open on purpose (a warning at start; refused together with either token); unset: token with NODE_ENV=production, else open with a warning when no token is set',
    ),
  METRICS_TOKEN: secretOf(32).describe(
    "bearer token of /metrics (Authorization: Bearer <METRICS_TOKEN>), at least 32 characters; the ingress's /metrics needs it whenever /v1 needs a token (401 without it), a side port's only when it is set",
  ),
  TRUST_PROXY: trustProxy.describe(
    "proxies in front of the ingress whose X-Forwarded-For names the client: true (every hop), a hop count, or their addresses/CIDRs; unset: none, and failed authentications are not counted for requests forwarded by a private address (all clients would share the proxy's)",
  ),
  AUTH_FAILURE_LIMIT: int(20, 0).describe(
    'failed authentications (a wrong bearer token, browser token, metrics token or board password) one client address may make per AUTH_FAILURE_WINDOW_MS before every request of it that needs auth is refused with 429 (0 = no limit); counted per ingress process',
  ),
  AUTH_FAILURE_WINDOW_MS: int(60_000, 1000).describe(
    'the window of AUTH_FAILURE_LIMIT; an address over the limit is refused until its window ends',
  ),
});

/** Placed after WEB_TOKEN_SECRET in the schema: what a browser token must also satisfy. */
export const webTokenShape = () => ({
  WEB_TOKEN_MAX_TTL_S: int(86_400, 60).describe(
    'longest life of a browser token: one whose exp - iat (or, without iat, exp - now) is longer is refused with 401',
  ),
  WEB_TOKEN_AUDIENCE: optionalString.describe(
    'when set, a browser token must carry this aud claim (401 otherwise)',
  ),
  WEB_TOKEN_ISSUER: optionalString.describe(
    'when set, a browser token must carry this iss claim (401 otherwise)',
  ),
});
