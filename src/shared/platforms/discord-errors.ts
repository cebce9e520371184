import { errorForStatus } from './send-errors.js';

/** Discord's 429 body: `{ "retry_after": 1.5, ... }` (seconds). */
function retryAfterOf(body: string): number | undefined {
  try {
    const value = (JSON.parse(body) as { retry_after?: unknown }).retry_after;
    return typeof value === 'number' && value >= 0 ? Math.ceil(value) : undefined;
  } catch {
    return undefined;
  }
}

/** The adapter wraps REST refusals as NetworkError(cause: DiscordApiError{status, body}). */
export function discordSendError(error: unknown): unknown {
  const cause = (error as { originalError?: { name?: string; status?: number; message?: string } } | null)
    ?.originalError;
  if (cause?.name !== 'DiscordApiError' || typeof cause.status !== 'number') return error;
  const body = cause.message ?? '';
  return (
    errorForStatus('discord', cause.status, `${cause.status}: ${body.slice(0, 200)}`, retryAfterOf(body)) ??
    error
  );
}
