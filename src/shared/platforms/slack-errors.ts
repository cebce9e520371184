import { type Refusal, refusalError } from './send-errors.js';

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
const REFUSALS: Record<string, Refusal> = {
  ratelimited: 'rate-limited',
  channel_not_found: 'not-found',
  thread_not_found: 'not-found',
  user_not_found: 'not-found',
  message_not_found: 'not-found',
  not_in_channel: 'denied',
  is_archived: 'denied',
  channel_is_archived: 'denied',
  restricted_action: 'denied',
  restricted_action_read_only_channel: 'denied',
  restricted_action_thread_only_channel: 'denied',
  restricted_action_non_threadable_channel: 'denied',
  cannot_dm_bot: 'denied',
  missing_scope: 'denied',
  ekm_access_denied: 'denied',
  team_access_not_granted: 'denied',
  access_denied: 'denied',
  invalid_auth: 'auth',
  not_authed: 'auth',
  account_inactive: 'auth',
  token_revoked: 'auth',
  token_expired: 'auth',
  msg_too_long: 'invalid',
  no_text: 'invalid',
  invalid_blocks: 'invalid',
  too_many_attachments: 'invalid',
  invalid_arguments: 'invalid',
};

interface SlackClientError {
  code?: string;
  retryAfter?: number;
  data?: { error?: string };
}

export function slackSendError(error: unknown): unknown {
  const e = (error ?? {}) as SlackClientError;
  if (e.code === 'slack_webapi_rate_limited_error') {
    return refusalError('slack', 'rate-limited', 'HTTP 429', e.retryAfter);
  }
  if (e.code !== 'slack_webapi_platform_error') return error;
  const code = e.data?.error ?? '';
  const kind = Object.hasOwn(REFUSALS, code) ? REFUSALS[code] : undefined;
  return kind ? refusalError('slack', kind, code) : error;
}
