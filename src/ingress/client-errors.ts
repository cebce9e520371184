import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '../shared/logger.js';
import { ERROR_CODES, type ErrorCode, errorBody } from './errors.js';

/**
 * Errors that happen before a route runs, in the documented shape like every other error:
 * Node's HTTP parser refusing a request (`clientError`: bad request line, headers too large,
 * a request that timed out) and Fastify's router refusing a URL (bad percent-encoding, a path
 * segment too long). Without these hooks Node and Fastify answer in their own formats.
 */

/** Node's parser error codes → our codes. Everything else the parser refuses is a 400. */
function clientErrorCode(code: string | undefined): ErrorCode {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'REQUEST_TIMEOUT';
  if (code === 'HPE_HEADER_OVERFLOW') return 'HEADERS_TOO_LARGE';
  return 'BAD_REQUEST';
}

const MESSAGES: Partial<Record<ErrorCode, string>> = {
  REQUEST_TIMEOUT: 'the request was not received in time',
  HEADERS_TOO_LARGE: 'the request line and headers are larger than the server accepts',
  BAD_REQUEST: 'the request is not valid HTTP/1.1',
};

const REASONS: Partial<Record<ErrorCode, string>> = {
  REQUEST_TIMEOUT: 'Request Timeout',
  HEADERS_TOO_LARGE: 'Request Header Fields Too Large',
  BAD_REQUEST: 'Bad Request',
};

/** The raw HTTP response for a connection Node's parser gave up on. */
export function rawErrorResponse(code: ErrorCode, message = MESSAGES[code] ?? code): string {
  const body = JSON.stringify(errorBody(code, message));
  const status = ERROR_CODES[code];
  return (
    `HTTP/1.1 ${status} ${REASONS[code] ?? 'Error'}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

/** Fastify's `clientErrorHandler`: answer in our shape (when the socket can still be written), then close. */
export function clientErrorHandler(logger: Logger) {
  return (err: NodeJS.ErrnoException & { rawPacket?: unknown }, socket: Socket): void => {
    // A reset connection has no one left to answer.
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const code = clientErrorCode(err.code);
    logger.debug({ code: err.code, reason: err.message }, 'client error');
    if (socket.writable) socket.end(rawErrorResponse(code));
    else socket.destroy();
  };
}

/** Fastify's `frameworkErrors`: the router refused the URL before any route or hook ran. */
export function frameworkErrors(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    reply.code(414).send(errorBody('URI_TOO_LONG', 'a path segment is longer than the server accepts'));
    return;
  }
  if (error.code === 'FST_ERR_BAD_URL') {
    reply.code(400).send(errorBody('INVALID_URL', 'the URL path is not valid (malformed percent-encoding)'));
    return;
  }
  reply.code(500).send(errorBody('INTERNAL', 'internal error'));
}
