import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { HttpError } from './errors.js';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Bearer-token check for the HTTP API; hashing first makes the compare constant-time. */
export function bearerAuth(token: string) {
  const expected = digest(token);
  return async (request: FastifyRequest): Promise<void> => {
    const header = request.headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header);
    if (!match?.[1])
      throw new HttpError('UNAUTHORIZED', 'missing bearer token (Authorization: Bearer <API_TOKEN>)');
    if (!timingSafeEqual(digest(match[1].trim()), expected))
      throw new HttpError('UNAUTHORIZED', 'wrong bearer token');
  };
}
