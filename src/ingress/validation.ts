import type { z } from 'zod';
import { CHAT_KEY_RULE, isValidChatKey } from '../shared/chat-key.js';
import { isRedisUnavailable } from '../shared/redis-errors.js';
import { BODY_MAX_DEPTH, jsonTextDepth, UnstorableError } from '../shared/storable.js';
import { HttpError } from './errors.js';

export function parseChatKey(value: unknown): string {
  if (typeof value !== 'string' || !isValidChatKey(value)) {
    throw new HttpError('INVALID_CHAT_KEY', CHAT_KEY_RULE);
  }
  return value;
}

/**
 * The 400 for a JSON body nested deeper than BODY_MAX_DEPTH, checked on the raw text before
 * anything recursive (parser, schema, stringify) sees it; undefined when it is within bounds.
 */
export function bodyTooDeep(text: string): HttpError | undefined {
  return jsonTextDepth(text, BODY_MAX_DEPTH) > BODY_MAX_DEPTH
    ? new HttpError('VALIDATION_FAILED', `body: JSON nested deeper than ${BODY_MAX_DEPTH} levels`)
    : undefined;
}

/** Parse with zod; the message names the first offending field. */
export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.join('.') : what;
  throw new HttpError('VALIDATION_FAILED', `${field}: ${issue?.message ?? 'invalid'}`);
}

/** The fixed answer while Redis cannot take the request; the detail goes to the log only. */
export const REDIS_UNAVAILABLE_MESSAGE = 'storage is unavailable; retry later (with the same message id)';

/**
 * Redis unreachable, hung or refusing writes is a 503: the ingress connection fails fast
 * instead of queueing, so the client can retry (ids make that safe). A value that cannot be
 * stored is the client's 400. Anything else is a bug: it propagates to the 500 handler.
 */
export async function withRedis<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof HttpError) throw err;
    if (err instanceof UnstorableError) throw new HttpError('VALIDATION_FAILED', `message: ${err.message}`);
    if (isRedisUnavailable(err))
      throw new HttpError('REDIS_UNAVAILABLE', REDIS_UNAVAILABLE_MESSAGE, { cause: err });
    throw err;
  }
}
