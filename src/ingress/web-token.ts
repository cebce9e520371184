import type { FastifyRequest } from 'fastify';
import { errors, jwtVerify } from 'jose';
import { WEB_TOKEN_ALG, webTokenKey } from '../shared/web-token.js';
import { HttpError } from './errors.js';
import { secretMatcher } from './secret.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** chatlane's: set when the request came with a browser token, the one chat it may touch. */
    chatlaneWebChat: string | undefined;
  }
}

/** Routes a browser token opens (route patterns under /v1); the chat is checked per route. */
const WEB_ROUTES = new Set(['/v1/ui', '/v1/ui/:id/stream', '/v1/ui/:id/messages', '/v1/ui/:id/stop']);
const LIVE_STREAM_ROUTE = '/v1/chats/:chatKey/stream';

export interface ApiAuthOptions {
  /** API_TOKEN: opens everything. Unset: /v1 is open (development). */
  apiToken?: string | undefined;
  /** WEB_TOKEN_SECRET: per-chat browser tokens are accepted. */
  webTokenSecret?: string | undefined;
  /** The prefix chatlane's routes are mounted under ('' standalone): the routes below are matched without it. */
  prefix?: string;
}

/**
 * The /v1 bearer check: API_TOKEN (compared in constant time) opens every route; a browser
 * token (JWT, HS256, `sub` = chatKey, `exp` required) opens `/v1/ui*` and the live stream of
 * its own chat only. The chat of a route with the chat in its path is checked here; POST
 * /v1/ui names it in the body and calls `assertChat` itself. Refusals: 401 missing, wrong,
 * expired; 403 another chat or another route (nothing is written either way).
 */
export function apiAuth(options: ApiAuthOptions) {
  const matches = options.apiToken ? secretMatcher(options.apiToken) : undefined;
  const key = options.webTokenSecret ? webTokenKey(options.webTokenSecret) : undefined;
  return async (request: FastifyRequest): Promise<void> => {
    const header = request.headers.authorization ?? '';
    const token = /^Bearer\s+(.+)$/i.exec(header)?.[1]?.trim();
    if (!token) {
      if (!matches) return;
      throw new HttpError(
        'UNAUTHORIZED',
        'missing bearer token (Authorization: Bearer <API_TOKEN or browser token>)',
      );
    }
    if (matches?.(token)) return;
    if (!key || token.split('.').length !== 3) {
      if (!matches) return;
      throw new HttpError('UNAUTHORIZED', 'wrong bearer token');
    }
    const chatKey = await verify(token, key);
    const route = (request.routeOptions.url ?? '').slice(options.prefix?.length ?? 0);
    const params = request.params as Record<string, unknown>;
    const routeChat = route === LIVE_STREAM_ROUTE ? params.chatKey : WEB_ROUTES.has(route) ? params.id : null;
    if (routeChat === null)
      throw new HttpError('FORBIDDEN', "a browser token opens only /v1/ui and its chat's live stream");
    if (routeChat !== undefined && routeChat !== chatKey) throw forbiddenChat();
    request.chatlaneWebChat = chatKey;
  };
}

async function verify(token: string, key: Uint8Array): Promise<string> {
  try {
    const { payload } = await jwtVerify(token, key, {
      algorithms: [WEB_TOKEN_ALG],
      requiredClaims: ['exp', 'sub'],
    });
    return payload.sub!;
  } catch (err) {
    if (err instanceof errors.JWTExpired) throw new HttpError('UNAUTHORIZED', 'browser token expired');
    throw new HttpError('UNAUTHORIZED', 'browser token not valid (signature, algorithm or claims)');
  }
}

function forbiddenChat(): HttpError {
  return new HttpError('FORBIDDEN', 'this browser token is for another chat');
}

/** Routes that name their chat in the body: a browser token must be for that chat. */
export function assertChat(request: FastifyRequest, chatKey: string): void {
  if (request.chatlaneWebChat !== undefined && request.chatlaneWebChat !== chatKey) throw forbiddenChat();
}
