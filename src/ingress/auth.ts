import type { FastifyRequest } from 'fastify';
import { HttpError } from './errors.js';
import { secretMatcher } from './secret.js';

/** Bearer-token check for the HTTP API, compared in constant time. */
export function bearerAuth(token: string) {
  const matches = secretMatcher(token);
  return async (request: FastifyRequest): Promise<void> => {
    const header = request.headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header);
    if (!match?.[1])
      throw new HttpError('UNAUTHORIZED', 'missing bearer token (Authorization: Bearer <API_TOKEN>)');
    if (!matches(match[1].trim())) throw new HttpError('UNAUTHORIZED', 'wrong bearer token');
  };
}
