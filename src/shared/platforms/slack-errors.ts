import {
  AdapterRateLimitError,
  AuthenticationError,
  PermissionError,
  ResourceNotFoundError,
  ValidationError,
} from '@chat-adapter/shared';

/**
 * Slack Web API failures as Chat SDK errors, so delivery can tell "wait", "retry" and
 * "give up" apart the same way for every platform. Slack answers most failures with HTTP
 * 200 and `{ ok: false, error: "<code>" }`; the client raises them as
 * `slack_webapi_platform_error` with `data.error`, and a 429 (with `rejectRateLimitedCalls`)
 * as `slack_webapi_rate_limited_error` with `retryAfter` in seconds.
 *
 * Codes that retrying cannot fix become permanent errors (the item is skipped and recorded
 * as `delivery.failed`); anything else (internal_error, service_unavailable, network) is
 * rethrown unchanged and retried.
 */
const NOT_FOUND = new Set(['channel_not_found', 'thread_not_found', 'user_not_found', 'message_not_found']);
const DENIED = new Set([
  'not_in_channel',
  'is_archived',
  'channel_is_archived',
  'restricted_action',
  'restricted_action_read_only_channel',
  'restricted_action_thread_only_channel',
  'restricted_action_non_threadable_channel',
  'cannot_dm_bot',
  'missing_scope',
  'ekm_access_denied',
  'team_access_not_granted',
  'access_denied',
]);
const AUTH = new Set(['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired']);
const INVALID = new Set([
  'msg_too_long',
  'no_text',
  'invalid_blocks',
  'too_many_attachments',
  'invalid_arguments',
]);

interface SlackClientError {
  code?: string;
  retryAfter?: number;
  data?: { error?: string };
}

export function slackSendError(error: unknown): unknown {
  const e = (error ?? {}) as SlackClientError;
  if (e.code === 'slack_webapi_rate_limited_error') return new AdapterRateLimitError('slack', e.retryAfter);
  if (e.code !== 'slack_webapi_platform_error') return error;
  const code = e.data?.error ?? '';
  if (code === 'ratelimited') return new AdapterRateLimitError('slack');
  if (NOT_FOUND.has(code)) return new ResourceNotFoundError('slack', code);
  if (DENIED.has(code)) return new PermissionError('slack', `post (${code})`);
  if (AUTH.has(code)) return new AuthenticationError('slack', `Slack refused the bot token (${code})`);
  if (INVALID.has(code)) return new ValidationError('slack', `Slack refused the message (${code})`);
  return error;
}
