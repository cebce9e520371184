import { z } from 'zod';
import { parseJsonAs } from '../parse-json.js';

/**
 * Where a chat's replies go: kept in the chat's meta hash (`route` field) and written by the
 * ingest script whenever an entry point passes one. A chat without a route (HTTP API only)
 * is never delivered anywhere: its outbox is read over the API.
 *
 * `channel` names the sender in the registry (`./sender.ts`). The other fields are what
 * that sender needs to reach the conversation again:
 * - chat platforms (Chat SDK adapters): `threadId` = the adapter's raw thread id;
 * - signed generic webhooks: `source` (whose secret signs the reply) and `url` (`replyTo.url`).
 * `data` carries anything else a sender needs, as short strings.
 */
export const replyRouteSchema = z
  .object({
    channel: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,49}$/, 'channel must be 1-50 chars of [a-z0-9_-]'),
    threadId: z.string().min(1).max(1000).optional(),
    source: z.string().min(1).max(64).optional(),
    url: z.string().url().max(2048).optional(),
    data: z.record(z.string().max(100), z.string().max(1000)).optional(),
  })
  .strict();
export type ReplyRoute = z.infer<typeof replyRouteSchema>;

/**
 * Canonical JSON: fixed key order, so the ingest script can tell "unchanged" by comparing
 * strings and skip the write.
 */
export function encodeRoute(route: ReplyRoute): string {
  const ordered: Record<string, unknown> = { channel: route.channel };
  if (route.threadId !== undefined) ordered.threadId = route.threadId;
  if (route.source !== undefined) ordered.source = route.source;
  if (route.url !== undefined) ordered.url = route.url;
  if (route.data !== undefined) {
    ordered.data = Object.fromEntries(Object.entries(route.data).sort(([a], [b]) => (a < b ? -1 : 1)));
  }
  return JSON.stringify(ordered);
}

/** The stored route, or undefined when absent or unreadable (then nothing is delivered). */
export function decodeRoute(raw: string | null | undefined): ReplyRoute | undefined {
  return parseJsonAs(replyRouteSchema, raw);
}
