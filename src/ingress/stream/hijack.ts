import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { HttpError } from '../errors.js';
import type { StreamClients, StreamSlot } from './clients.js';

/**
 * The one capacity rule for every long-lived response (`/v1/chats/:chatKey/stream`,
 * `POST /v1/ui`, `GET /v1/ui/:id/stream`): a slot is taken before anything opens, so a refusal
 * costs no Redis read — 503 STREAM_CAPACITY at SSE_MAX_CLIENTS (a closing process counts as
 * full; another ingress may have room), 429 STREAM_LIMIT at SSE_MAX_CLIENTS_PER_CHAT (the
 * chat's own streams must close first). The caller releases the slot when its response ends.
 */
export function reserveStream(clients: StreamClients, chatKey: string): StreamSlot {
  const slot = clients.reserve(chatKey);
  if (slot === 'process') {
    throw new HttpError(
      'STREAM_CAPACITY',
      `this ingress already serves ${clients.size} streams; retry (another ingress)`,
    );
  }
  if (slot === 'chat') {
    throw new HttpError(
      'STREAM_LIMIT',
      `chat ${chatKey} already has ${clients.sizeOf(chatKey)} open streams on this ingress (SSE_MAX_CLIENTS_PER_CHAT); close one first`,
    );
  }
  return slot;
}

/**
 * Takes the response over from Fastify and sends its 200 head: from here on the stream
 * writes the body itself. Headers set by hooks (CORS) survive the hijack only if written here.
 */
export function hijackStream(reply: FastifyReply, headers: OutgoingHttpHeaders): ServerResponse {
  // Node's type wants some named headers as strings only; a hook's values are what it set.
  const hooked = reply.getHeaders() as OutgoingHttpHeaders;
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    ...hooked,
    ...headers,
    // The response only ends when the stream does (shutdown, a slow client): then the
    // socket goes too, instead of idling in keep-alive and holding up the server's close.
    connection: 'close',
  });
  // Node holds a written head back until the first body byte. A /v1/ui reply may have none for
  // a while (the chat waits for a worker), and its client would wait for the head until the
  // first heartbeat (SSE_HEARTBEAT_MS, 15 s) instead of seeing the request accepted at once.
  res.flushHeaders();
  return res;
}
