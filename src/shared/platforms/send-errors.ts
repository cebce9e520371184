import {
  AdapterRateLimitError,
  AuthenticationError,
  PermissionError,
  ResourceNotFoundError,
  ValidationError,
} from '@chat-adapter/shared';

/**
 * Platform API refusals as the Chat SDK errors delivery classifies (by class name:
 * AdapterRateLimitError waits `retryAfter` seconds or the backoff; PermissionError,
 * ResourceNotFoundError and ValidationError are permanent; AuthenticationError retries so
 * an operator can fix a token). For adapters that raise their own error types (Slack's Web
 * API client, Discord, WhatsApp).
 */
export type Refusal = 'rate-limited' | 'auth' | 'denied' | 'not-found' | 'invalid';

export function refusalError(
  platform: string,
  kind: Refusal,
  what: string,
  retryAfterSeconds?: number,
): Error {
  switch (kind) {
    case 'rate-limited':
      return new AdapterRateLimitError(platform, retryAfterSeconds);
    case 'auth':
      return new AuthenticationError(platform, `${platform} refused the credentials (${what})`);
    case 'denied':
      return new PermissionError(platform, `send (${what})`);
    case 'not-found':
      return new ResourceNotFoundError(platform, 'conversation', what);
    case 'invalid':
      return new ValidationError(platform, `${platform} refused the message (${what})`);
  }
}

/** An HTTP status's refusal; undefined for 5xx and the rest, which stay as they are and retry. */
export function errorForStatus(
  platform: string,
  status: number,
  what: string,
  retryAfterSeconds?: number,
): Error | undefined {
  const kind: Refusal | undefined =
    status === 429
      ? 'rate-limited'
      : status === 401
        ? 'auth'
        : status === 403
          ? 'denied'
          : status === 404
            ? 'not-found'
            : status >= 400 && status < 500
              ? 'invalid'
              : undefined;
  return kind && refusalError(platform, kind, what, retryAfterSeconds);
}
