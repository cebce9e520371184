import { chatEventOf, outboxItemOf } from '../../shared/store/chat-store.js';
import { browserEvent } from '../ui/browser-view.js';
import { formatCursor, type StreamCursor } from './cursor.js';
import type { HubEntry } from './hub.js';

/** Who reads a stream: the API token sees events whole, a browser token without failure details. */
export type StreamView = 'api' | 'browser';

/**
 * One SSE message: `event: outbox` with an item as `GET /outbox` lists it, or `event: event`
 * with an event as `GET /events` lists it (for a browser, without its error detail); the id
 * is the client's cursor after it.
 */
export function sseMessage(item: HubEntry, cursor: StreamCursor, view: StreamView = 'api'): string {
  let data: unknown;
  if (item.stream === 'outbox') data = outboxItemOf(item.entry);
  else data = view === 'browser' ? browserEvent(chatEventOf(item.entry)) : chatEventOf(item.entry);
  const event = item.stream === 'outbox' ? 'outbox' : 'event';
  return `id: ${formatCursor(cursor)}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}
