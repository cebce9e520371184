import { errorForStatus } from './send-errors.js';

/**
 * WhatsApp Cloud API failures as Chat SDK errors delivery can classify. The adapter raises
 * `WhatsAppApiError` with the HTTP status and Meta's numeric code. Meta sends no Retry-After:
 * a throttle (HTTP 429, or codes 4, 80007, 130429, 131048, 131056 under any status) waits
 * delivery's backoff. Any other 4xx is a request Meta will refuse again (131047: the 24-hour
 * window is closed, 131026: undeliverable, 131030: not an allowed recipient, 100: bad
 * parameter), so the item is given up. 5xx and network failures are retried.
 */
const THROTTLED = new Set([4, 80007, 130429, 131048, 131056]);

interface GraphError {
  name?: string;
  status?: number;
  errorCode?: number;
  providerMessage?: string;
}

export function whatsappSendError(error: unknown): unknown {
  const e = (error ?? {}) as GraphError;
  if (e.name !== 'WhatsAppApiError' || typeof e.status !== 'number') return error;
  const code = e.errorCode;
  const what = `${e.status}${code !== undefined ? ` code ${code}` : ''}: ${e.providerMessage ?? 'refused'}`;
  const status = code !== undefined && THROTTLED.has(code) ? 429 : e.status;
  return errorForStatus('whatsapp', status, what) ?? error;
}
