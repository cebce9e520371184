import {
  APICallError,
  DownloadError,
  InvalidPromptError,
  LoadAPIKeyError,
  MessageConversionError,
  RetryError,
  StreamProviderError,
} from 'ai';
import { FileRefusedError, type MessageFailureCode } from '../../shared/errors.js';
import { isRedisUnavailable } from '../../shared/redis-errors.js';
import { isContextOverflowError } from './overflow.js';

/**
 * What a failed turn says about its messages (docs/agent.md "When a message fails"):
 * - `message`: the messages themselves cannot be processed. Retrying cannot help, so the
 *   batch fails now: one notice, the messages kept in history marked failed.
 * - `model`: the model endpoint is unreachable, refuses our credentials or is overloaded.
 *   Nothing is wrong with the messages: they stay pending and the job is delayed without
 *   spending an attempt, however long the outage lasts — never a notice to everyone.
 * - `transient`: anything else (Redis, a bug, a flaky tool). The job retries; only on its
 *   last attempt does the batch fail (TURN_FAILED), so one bad message cannot block its chat.
 */
export type ModelErrorKind = 'auth' | 'not_found' | 'rate_limit' | 'server' | 'network' | 'timeout';

export type TurnFailure =
  | { kind: 'message'; code: MessageFailureCode }
  | { kind: 'model'; errorKind: ModelErrorKind }
  | { kind: 'transient'; infrastructure: boolean };

/** Provider statuses that name the request's content, not the endpoint. */
const CONTENT_STATUSES = new Set([400, 413, 415, 422]);

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** The error and its causes, outermost first (bounded: causes can loop). */
function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  let current: unknown = err;
  while (current !== undefined && current !== null && out.length < 8) {
    out.push(current);
    if (RetryError.isInstance(current)) current = current.lastError;
    else current = (current as { cause?: unknown }).cause;
  }
  return out;
}

function apiStatusKind(status: number | undefined): TurnFailure | undefined {
  if (status === undefined) return { kind: 'model', errorKind: 'network' };
  if (status === 401 || status === 403) return { kind: 'model', errorKind: 'auth' };
  if (status === 404) return { kind: 'model', errorKind: 'not_found' };
  if (status === 408) return { kind: 'model', errorKind: 'timeout' };
  if (status === 429) return { kind: 'model', errorKind: 'rate_limit' };
  if (status >= 500) return { kind: 'model', errorKind: 'server' };
  if (CONTENT_STATUSES.has(status)) return { kind: 'message', code: 'CONTENT_REJECTED' };
  return undefined;
}

/** A value an in-stream error names its HTTP status with: 503, or '503'. */
function httpStatus(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\d{3}$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isInteger(n) && n >= 400 && n <= 599 ? n : undefined;
}

/**
 * The status a provider's error inside an opened stream names. A turn gets the AI SDK's
 * StreamProviderError; the fallback reads the stream's error part before the SDK wraps it: a
 * plain object, with `statusCode` (the Anthropic, OpenAI and Google packages) or as the
 * OpenAI-compatible servers send it (`code: 502`, `status`).
 */
function streamErrorStatus(e: unknown): number | undefined {
  if (typeof e !== 'object' || e === null) return undefined;
  if (e instanceof Error && !StreamProviderError.isInstance(e)) return undefined;
  const { statusCode, status, code } = e as { statusCode?: unknown; status?: unknown; code?: unknown };
  return httpStatus(statusCode) ?? httpStatus(status) ?? httpStatus(code);
}

export function classifyTurnError(err: unknown): TurnFailure {
  const errors = chain(err);
  // The turn's own refusals come first: they may be wrapped in anything the SDK adds.
  if (errors.some((e) => e instanceof FileRefusedError || DownloadError.isInstance(e))) {
    return { kind: 'message', code: 'FILE_REFUSED' };
  }
  if (isContextOverflowError(err)) return { kind: 'message', code: 'CONTEXT_OVERFLOW' };
  for (const e of errors) {
    if (APICallError.isInstance(e)) {
      const byStatus = apiStatusKind(e.statusCode);
      if (byStatus) return byStatus;
    }
    const streamed = streamErrorStatus(e);
    if (streamed !== undefined) {
      const byStatus = apiStatusKind(streamed);
      if (byStatus) return byStatus;
    }
    if (LoadAPIKeyError.isInstance(e)) return { kind: 'model', errorKind: 'auth' };
    if (InvalidPromptError.isInstance(e) || MessageConversionError.isInstance(e)) {
      return { kind: 'message', code: 'INVALID_MESSAGE' };
    }
    const name = (e as { name?: unknown }).name;
    // LLM_TIMEOUT_MS: a step that takes longer is aborted (agent/turn-abort.ts).
    if (name === 'TimeoutError') return { kind: 'model', errorKind: 'timeout' };
    // A socket error reaching the turn is the model's: workers' Redis commands wait for a
    // reconnect instead of failing with one (src/shared/redis.ts).
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return { kind: 'model', errorKind: 'network' };
    if (isRedisUnavailable(e)) return { kind: 'transient', infrastructure: true };
  }
  return { kind: 'transient', infrastructure: false };
}

/** Errors of a model's endpoint that the next model of LLM_FALLBACK_MODELS may not have. */
const OUTAGES = new Set<ModelErrorKind>(['server', 'network', 'timeout', 'rate_limit']);

/**
 * An outage of the model (5xx, refused or reset connection, timeout, 429): a step retried on
 * the next fallback model may succeed. Not a refused message (400), bad credentials or an
 * unknown model, which are the operator's to fix, not a reason to spend another provider.
 */
export function isOutage(err: unknown): boolean {
  const failure = classifyTurnError(err);
  return failure.kind === 'model' && OUTAGES.has(failure.errorKind);
}

/** The kind of a model error that calls for retrying the same model a little later. */
export function isRateLimit(err: unknown): boolean {
  const failure = classifyTurnError(err);
  return failure.kind === 'model' && failure.errorKind === 'rate_limit';
}

/** A short, single-line description of an error for events and the failed message. */
export function errorDetail(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.replace(/\s+/g, ' ').slice(0, 300);
}
