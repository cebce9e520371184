/**
 * The one registry of HTTP error codes. Codes are stable API: clients switch on them.
 */
export const ERROR_CODES = {
  BAD_REQUEST: 400,
  INVALID_URL: 400,
  INVALID_JSON: 400,
  VALIDATION_FAILED: 400,
  INVALID_CHAT_KEY: 400,
  INVALID_CURSOR: 400,
  REPLY_URL_NOT_ALLOWED: 400,
  MEMORY_TOO_LARGE: 400,
  /** A file part's URL is not https: or a data: URL, or names a private host. */
  FILE_URL_NOT_ALLOWED: 400,
  /** A file part's mediaType is not in FILE_MEDIA_TYPES. */
  FILE_TYPE_NOT_ALLOWED: 400,
  /** A file part's data: URL holds more than FILE_DATA_URL_MAX_BYTES. */
  FILE_TOO_LARGE: 400,
  /** POST /v1/ui with a trigger chatlane does not take (regenerate-message: history is the record). */
  UNSUPPORTED_TRIGGER: 400,
  /** An approval answer whose tool call, input or signature is not its request's (POST /v1/ui). */
  APPROVAL_MISMATCH: 400,
  UNAUTHORIZED: 401,
  INVALID_SIGNATURE: 401,
  TIMESTAMP_OUT_OF_TOLERANCE: 401,
  /** A browser token used for another chat, or outside /v1/ui and its chat's live stream. */
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CHAT_NOT_FOUND: 404,
  UNKNOWN_SOURCE: 404,
  PLATFORM_NOT_ENABLED: 404,
  CONTEXT_NOT_FOUND: 404,
  /** No tool approval request of that id in the chat (or it was settled long enough ago to be forgotten). */
  APPROVAL_NOT_FOUND: 404,
  REQUEST_TIMEOUT: 408,
  CHAT_BUSY: 409,
  /** The tool approval request was answered already, or settled (expired, superseded): nothing changes. */
  APPROVAL_RESOLVED: 409,
  BODY_TOO_LARGE: 413,
  URI_TOO_LONG: 414,
  UNSUPPORTED_MEDIA_TYPE: 415,
  CHAT_FULL: 429,
  /** The client address made AUTH_FAILURE_LIMIT failed authentications within AUTH_FAILURE_WINDOW_MS. */
  TOO_MANY_AUTH_FAILURES: 429,
  /** A chat already has SSE_MAX_CLIENTS_PER_CHAT streamed responses open on this ingress. */
  STREAM_LIMIT: 429,
  HEADERS_TOO_LARGE: 431,
  INTERNAL: 500,
  REDIS_UNAVAILABLE: 503,
  /** REDIS_REPLICA_ACKS replicas did not confirm the write within REDIS_REPLICA_ACKS_TIMEOUT_MS. */
  REPLICATION_TIMEOUT: 503,
  SHUTTING_DOWN: 503,
  STREAM_CAPACITY: 503,
  PLATFORM_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class HttpError extends Error {
  override name = 'HttpError';
  readonly statusCode: number;
  /** `cause` is logged, never sent: the client sees only the code and the message. */
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.statusCode = ERROR_CODES[code];
  }
}

export interface ErrorBody {
  error: { code: ErrorCode; message: string };
}

export function errorBody(code: ErrorCode, message: string): ErrorBody {
  return { error: { code, message } };
}
