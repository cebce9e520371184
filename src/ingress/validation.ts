import type { z } from 'zod';
import { isValidChatKey } from '../shared/chat-key.js';
import { HttpError } from './errors.js';

export function parseChatKey(value: unknown): string {
  if (typeof value !== 'string' || !isValidChatKey(value)) {
    throw new HttpError('INVALID_CHAT_KEY', 'chatKey must be 1-200 characters of [A-Za-z0-9._:@-]');
  }
  return value;
}

/** Parse with zod; the message names the first offending field. */
export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.join('.') : what;
  throw new HttpError('VALIDATION_FAILED', `${field}: ${issue?.message ?? 'invalid'}`);
}

/**
 * Any failure talking to Redis is a 503: the ingress connection fails fast instead of
 * queueing, so the client can retry (ids make that safe).
 */
export async function withRedis<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof HttpError) throw err;
    throw new HttpError('REDIS_UNAVAILABLE', `storage unavailable: ${(err as Error).message}`);
  }
}
