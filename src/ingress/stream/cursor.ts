import { isStreamId } from '../../shared/stream-id.js';

/**
 * A live stream client's position in a chat's two streams (outbox and events), written as
 * the SSE event id: `<outbox stream id>.<events stream id>`, e.g.
 * `1795427444196-0.1795427444201-3`. Every SSE message carries the cursor *after* it, so
 * `Last-Event-ID` (which EventSource sends on reconnect) resumes both streams exactly.
 * `0-0` stands for "before the first entry".
 */
export interface StreamCursor {
  outbox: string;
  events: string;
}

export type StreamName = keyof StreamCursor;

const CURSOR = /^(\d{1,20}-\d{1,20})\.(\d{1,20}-\d{1,20})$/;

export function formatCursor(cursor: StreamCursor): string {
  return `${cursor.outbox}.${cursor.events}`;
}

/** undefined when the text is not a cursor (or a part overflows 64 bits). */
export function parseCursor(text: string): StreamCursor | undefined {
  const m = CURSOR.exec(text.trim());
  if (!m) return undefined;
  const cursor = { outbox: m[1]!, events: m[2]! };
  return isStreamId(cursor.outbox) && isStreamId(cursor.events) ? cursor : undefined;
}
