import { createHash } from 'node:crypto';

/**
 * The id a receiver dedupes a delivered reply on (the generic webhook's `webhook-id` and the
 * body's `id`). An outbox item's own id is its chat's stream id (`<ms>-<seq>`), unique only
 * within that chat: two chats answered in the same millisecond both have `…-0`, and a
 * receiver serving many chats would drop one of them as a duplicate. So the delivered id is
 * derived from the chat and the item: the same item always gets the same id (redeliveries
 * dedupe), items of different chats different ones.
 *
 * `msg_` + 128 bits of SHA-256 over `<chatKey>\n<itemId>` in base64url: a fixed 26 characters
 * of `[A-Za-z0-9_-]` — no `.` (Standard Webhooks signs `<id>.<timestamp>.<body>`), nothing a
 * header, log line or our own ingress's webhook-id rule would refuse, and no chatKey in the
 * header. `\n` cannot occur in a chatKey or a stream id, so distinct pairs hash distinct input.
 */
export function deliveryId(chatKey: string, itemId: string): string {
  const digest = createHash('sha256').update(`${chatKey}\n${itemId}`).digest();
  return `msg_${digest.subarray(0, 16).toString('base64url')}`;
}
