import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';
import type { Logger } from '../shared/logger.js';
import { HttpError } from './errors.js';

/**
 * Failed authentications counted per client address (docs/security.md, "Limits"): a wrong
 * API token, browser token, metrics token or board password. Past the limit within the window,
 * every request of that address that needs a credential is refused with 429 before its
 * credential is even read, so guessing stops there; a request that sends no credential at all
 * guesses nothing and is not counted. @fastify/rate-limit keeps the counts (its local store:
 * per ingress process) and only this failure path touches them.
 */
export interface AuthFailureOptions {
  /** Failures one address may make per window; 0 = no limit. */
  limit: number;
  windowMs: number;
  /**
   * TRUST_PROXY is set: `request.ip` is the client Fastify read from X-Forwarded-For. Unset, a
   * request forwarded by a private address (a proxy in front) is not counted: every client
   * behind the proxy would share its address, and one of them could lock all out.
   */
  trustProxy: boolean;
}

export interface AuthFailures {
  /** Throws 429 TOO_MANY_AUTH_FAILURES (with Retry-After) for an address over its limit. */
  check(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** Counts one failed authentication of the request's address. */
  record(request: FastifyRequest): Promise<void>;
}

/** AUTH_FAILURE_LIMIT and AUTH_FAILURE_WINDOW_MS's defaults: 20 a minute. */
export const DEFAULT_AUTH_FAILURES = { limit: 20, windowMs: 60_000 } as const;

export const NO_AUTH_FAILURE_LIMIT: AuthFailures = {
  check: async () => undefined,
  record: async () => undefined,
};

const FORWARDED_HEADERS = ['x-forwarded-for', 'forwarded', 'x-real-ip'] as const;

/** Where a proxy in front of the ingress connects from: a network of the operator's own. */
const PROXY_RANGES = new Set(['private', 'loopback', 'linkLocal', 'uniqueLocal', 'carrierGradeNat']);

function isPrivateAddress(address: string): boolean {
  try {
    return PROXY_RANGES.has(ipaddr.process(address).range());
  } catch {
    return false;
  }
}

/**
 * The failure counter of one app. The rate-limit plugin is registered in a scope of its own
 * that holds no route, so nothing else of the app (or of an app it is mounted in) is limited.
 */
export async function authFailures(
  app: FastifyInstance,
  options: AuthFailureOptions,
  logger: Logger,
): Promise<AuthFailures> {
  if (options.limit === 0) return NO_AUTH_FAILURE_LIMIT;
  let limiter: ReturnType<FastifyInstance['createRateLimit']> | undefined;
  await app.register(async (scope) => {
    await scope.register(rateLimit, { global: false });
    limiter = scope.createRateLimit({ max: options.limit, timeWindow: options.windowMs });
  });
  const limit = limiter!;
  let warnedProxy = false;
  const countable = (request: FastifyRequest): boolean => {
    if (options.trustProxy) return true;
    const forwarded = FORWARDED_HEADERS.some((h) => request.headers[h] !== undefined);
    if (!forwarded || !isPrivateAddress(request.ip)) return true;
    if (!warnedProxy) {
      warnedProxy = true;
      logger.warn(
        { proxy: request.ip },
        'requests arrive through a proxy and TRUST_PROXY is unset: failed authentications are not counted per client (set TRUST_PROXY to the proxy, docs/security.md)',
      );
    }
    return false;
  };
  return {
    async check(request, reply) {
      if (!countable(request)) return;
      const state = await limit(request, { increment: false });
      if (state.isAllowed || state.remaining > 0) return;
      reply.header('retry-after', String(Math.max(1, state.ttlInSeconds)));
      throw new HttpError(
        'TOO_MANY_AUTH_FAILURES',
        `too many failed authentications from this address; retry in ${Math.max(1, state.ttlInSeconds)} s`,
      );
    },
    async record(request) {
      if (!countable(request)) return;
      const state = await limit(request);
      if (!state.isAllowed && state.remaining === 0 && state.max > 0 && !state.isExceeded) {
        logger.warn(
          { address: state.key, failures: state.max, windowMs: options.windowMs },
          'too many failed authentications: this address is refused until its window ends',
        );
      }
    },
  };
}
