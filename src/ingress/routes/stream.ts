import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { HttpError } from '../errors.js';
import type { StreamClients } from '../stream/clients.js';
import { parseCursor, type StreamCursor } from '../stream/cursor.js';
import { hijackStream, reserveStream } from '../stream/hijack.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';

const streamQuery = z.object({ lastEventId: z.string().max(100).optional() }).strict();

/**
 * `GET /v1/chats/:chatKey/stream`: Server-Sent Events of the chat's outbox items
 * (`event: outbox`) and chat events (`event: event`) as they happen. Everything that can be
 * refused is refused before the stream opens (400 INVALID_CHAT_KEY / INVALID_CURSOR, 401 by
 * the /v1 bearer hook, 429 when the chat is at SSE_MAX_CLIENTS_PER_CHAT, 503 when Redis is
 * down or the process is at SSE_MAX_CLIENTS).
 * Resume with `Last-Event-ID` (or `?lastEventId=`): see `../stream/cursor.ts`.
 */
export async function streamRoutes(app: FastifyInstance): Promise<void> {
  const clients: StreamClients = app.chatlane.streams;

  app.get('/chats/:chatKey/stream', async (request, reply) => {
    const chatKey = parseChatKey((request.params as { chatKey?: unknown }).chatKey);
    const query = parseOrThrow(streamQuery, request.query, 'query');
    const header = request.headers['last-event-id'];
    const raw = (Array.isArray(header) ? header[0] : header) ?? query.lastEventId;
    let from: StreamCursor | undefined;
    if (raw !== undefined && raw.trim() !== '') {
      from = parseCursor(raw);
      if (!from) {
        throw new HttpError(
          'INVALID_CURSOR',
          'Last-Event-ID must be an event id this stream sent (`<outbox id>.<events id>`)',
        );
      }
    }
    const slot = reserveStream(clients, chatKey);
    const view = request.chatlaneWebChat === undefined ? 'api' : 'browser';
    const open = await withRedis(() => clients.open(slot, from, view));

    const res = hijackStream(reply, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      // nginx and some proxies buffer responses unless told not to.
      'x-accel-buffering': 'no',
    });
    // The response's close (not the request's, which ends with its empty body) is the client going away.
    res.on('close', () => open.close());
    open.attach(res);
  });
}
