import { chatEventOf, outboxItemOf } from '../../shared/store/chat-store.js';
import { formatCursor, type StreamCursor } from './cursor.js';
import type { HubEntry } from './hub.js';

/**
 * One SSE message: `event: outbox` with an item as `GET /outbox` lists it, or `event: event`
 * with an event as `GET /events` lists it; the id is the client's cursor after it.
 */
export function sseMessage(item: HubEntry, cursor: StreamCursor): string {
  const data = item.stream === 'outbox' ? outboxItemOf(item.entry) : chatEventOf(item.entry);
  const event = item.stream === 'outbox' ? 'outbox' : 'event';
  return `id: ${formatCursor(cursor)}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}
