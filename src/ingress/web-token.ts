import type { FastifyReply, FastifyRequest } from 'fastify';
import { errors, type JWTPayload, jwtVerify } from 'jose';
import { bearerToken, secretMatcher } from '../shared/secret.js';
import { WEB_TOKEN_ALG, webTokenKey } from '../shared/web-token.js';
import { type AuthFailures, NO_AUTH_FAILURE_LIMIT } from './auth-failures.js';
import { HttpError } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** chatlane's: set when the request came with a browser token, the one chat it may touch. */
    chatlaneWebChat: string | undefined;
  }
}

/** Routes a browser token opens (route patterns under /v1); the chat is checked per route. */
const WEB_ROUTES = new Set(['/v1/ui', '/v1/ui/:id/stream', '/v1/ui/:id/messages', '/v1/ui/:id/stop']);
/** Routes of one chat (`:chatKey`) a browser token opens for its own chat: the live stream, approvals. */
const CHAT_ROUTES = new Set([
  '/v1/chats/:chatKey/stream',
  '/v1/chats/:chatKey/approvals',
  '/v1/chats/:chatKey/approvals/:approvalId',
]);

export interface ApiAuthOptions {
  /** API_TOKEN: opens everything. */
  apiToken?: string | undefined;
  /** WEB_TOKEN_SECRET: per-chat browser tokens are accepted. */
  webTokenSecret?: string | undefined;
  /** What a browser token must also satisfy (WEB_TOKEN_MAX_TTL_S, _AUDIENCE, _ISSUER). */
  webTokenRules?: WebTokenRules;
  /** Where failed authentications are counted (default: not counted). */
  failures?: AuthFailures;
  /** The prefix chatlane's routes are mounted under ('' standalone): the routes below are matched without it. */
  prefix?: string;
}

export interface WebTokenRules {
  /** Longest life of a token: `exp - iat`, or `exp - now` without `iat`. */
  maxTtlS: number;
  audience?: string | undefined;
  issuer?: string | undefined;
}

/** WEB_TOKEN_MAX_TTL_S's default. */
export const DEFAULT_WEB_TOKEN_MAX_TTL_S = 86_400;

/**
 * The /v1 bearer check, installed by the /v1 scope on its own routes only whenever API_TOKEN or
 * WEB_TOKEN_SECRET is set: every request needs a valid token. API_TOKEN (compared in constant
 * time) opens every route; a browser token (JWT, HS256, `sub` = chatKey, `exp` required, no
 * longer-lived than `maxTtlS`, with `aud`/`iss` when configured) opens `/v1/ui*` and the live
 * stream of its own chat only. The chat of a route with the chat in its path is checked here;
 * POST /v1/ui names it in the body and calls `assertChat` itself. Refusals: 401 missing, wrong,
 * expired; 403 another chat or another route; 429 an address past its failures (nothing is
 * written either way). A wrong token counts as a failed authentication of the address.
 */
export function apiAuth(options: ApiAuthOptions) {
  const matches = options.apiToken ? secretMatcher(options.apiToken) : undefined;
  const key = options.webTokenSecret ? webTokenKey(options.webTokenSecret) : undefined;
  const rules = options.webTokenRules ?? { maxTtlS: DEFAULT_WEB_TOKEN_MAX_TTL_S };
  const failures = options.failures ?? NO_AUTH_FAILURE_LIMIT;
  const what = [matches && 'API_TOKEN', key && 'browser token'].filter(Boolean).join(' or ');
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    await failures.check(request, reply);
    const token = bearerToken(request.headers.authorization);
    if (!token) throw new HttpError('UNAUTHORIZED', `missing bearer token (Authorization: Bearer <${what}>)`);
    if (matches?.(token)) return;
    if (!key || token.split('.').length !== 3) {
      await failures.record(request);
      throw new HttpError('UNAUTHORIZED', 'wrong bearer token');
    }
    let chatKey: string;
    try {
      chatKey = await verify(token, key, rules);
    } catch (err) {
      await failures.record(request);
      throw err;
    }
    const route = (request.routeOptions.url ?? '').slice(options.prefix?.length ?? 0);
    const params = request.params as Record<string, unknown>;
    const routeChat = CHAT_ROUTES.has(route) ? params.chatKey : WEB_ROUTES.has(route) ? params.id : null;
    if (routeChat === null)
      throw new HttpError(
        'FORBIDDEN',
        "a browser token opens only /v1/ui, and its chat's live stream and approval requests",
      );
    if (routeChat !== undefined && routeChat !== chatKey) throw forbiddenChat();
    request.chatlaneWebChat = chatKey;
  };
}

async function verify(token: string, key: Uint8Array, rules: WebTokenRules): Promise<string> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, key, {
      algorithms: [WEB_TOKEN_ALG],
      requiredClaims: ['exp', 'sub'],
      ...(rules.audience !== undefined && { audience: rules.audience }),
      ...(rules.issuer !== undefined && { issuer: rules.issuer }),
    }));
  } catch (err) {
    if (err instanceof errors.JWTExpired) throw new HttpError('UNAUTHORIZED', 'browser token expired');
    if (err instanceof errors.JWTClaimValidationFailed && (err.claim === 'aud' || err.claim === 'iss'))
      throw new HttpError(
        'UNAUTHORIZED',
        `browser token not valid (${err.claim} is not the one this ingress takes)`,
      );
    throw new HttpError('UNAUTHORIZED', 'browser token not valid (signature, algorithm or claims)');
  }
  // exp is required and checked above; a token must not outlive WEB_TOKEN_MAX_TTL_S.
  const from = typeof payload.iat === 'number' ? payload.iat : Math.floor(Date.now() / 1000);
  if (payload.exp! - from > rules.maxTtlS) {
    throw new HttpError(
      'UNAUTHORIZED',
      `browser token lives longer than this ingress allows (exp - ${typeof payload.iat === 'number' ? 'iat' : 'now'} > ${rules.maxTtlS} s)`,
    );
  }
  return payload.sub!;
}

function forbiddenChat(): HttpError {
  return new HttpError('FORBIDDEN', 'this browser token is for another chat');
}

/** Routes that name their chat in the body: a browser token must be for that chat. */
export function assertChat(request: FastifyRequest, chatKey: string): void {
  if (request.chatlaneWebChat !== undefined && request.chatlaneWebChat !== chatKey) throw forbiddenChat();
}
