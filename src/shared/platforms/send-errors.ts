import {
  AdapterRateLimitError,
  AuthenticationError,
  PermissionError,
  ResourceNotFoundError,
  ValidationError,
} from '@chat-adapter/shared';

/**
 * A platform API's HTTP refusal as the Chat SDK error delivery classifies (by its `code`:
 * RATE_LIMITED waits `retryAfter` seconds or the backoff; AUTH_FAILED, PERMISSION_DENIED,
 * NOT_FOUND and VALIDATION_ERROR are permanent). Used by adapters that raise their own error
 * types (Discord, WhatsApp). Returns undefined for 5xx and other statuses: those stay as they
 * are and are retried.
 */
export function errorForStatus(
  platform: string,
  status: number,
  what: string,
  retryAfterSeconds?: number,
): Error | undefined {
  if (status === 429) return new AdapterRateLimitError(platform, retryAfterSeconds);
  if (status === 401)
    return new AuthenticationError(platform, `${platform} refused the credentials (${what})`);
  if (status === 403) return new PermissionError(platform, `send (${what})`);
  if (status === 404) return new ResourceNotFoundError(platform, 'conversation', what);
  if (status >= 400 && status < 500)
    return new ValidationError(platform, `${platform} refused the message (${what})`);
  return undefined;
}
