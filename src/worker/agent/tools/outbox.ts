import type { Logger } from '../../../shared/logger.js';
import type { WriteMark } from '../../../shared/replica-acks.js';
import type { ChatStore } from '../../../shared/store/chat-store.js';
import { traceparent } from '../../../shared/tracing/spans.js';

/**
 * Asks for the chat's delivery (BullMQ `deliveries`, deduplicated by chatKey). Must not throw
 * for the caller's sake: `writeOutbox` logs a failed trigger and the sweeper re-adds it.
 */
export type DeliveryTrigger = (chatKey: string) => Promise<void>;

/**
 * Every worker-side outbox write goes through here (chat_send; failure notices and contact
 * sends write in their own fenced scripts, then call `triggerDelivery`): the fenced write,
 * then — when the chat has a reply route — its delivery job. Chats without a route (HTTP
 * API only) cost no job: their outbox is read over the API.
 */
export async function writeOutbox(
  deps: { store: ChatStore; deliver?: DeliveryTrigger | undefined; logger: Logger },
  chatKey: string,
  fence: string,
  // The store's item; the traceparent is added here.
  item: Omit<Parameters<ChatStore['sendOutbox']>[2], 'traceparent'>,
): ReturnType<ChatStore['sendOutbox']> {
  const mark = deps.store.markWrite(chatKey);
  // The item carries the writing span's traceparent: its delivery, in whatever process, joins the trace.
  const tp = traceparent();
  const res = await deps.store.sendOutbox(chatKey, fence, tp ? { ...item, traceparent: tp } : item);
  if (res.ok && res.routed) await triggerDelivery(deps, chatKey, { itemId: res.id }, mark);
  return res;
}

/**
 * The chat's delivery job after a routed outbox write; a failed trigger is logged, never
 * thrown. With `mark` (REDIS_REPLICA_ACKS) the write is first confirmed on the replicas: a
 * reply must not reach the person while a failover could still lose it (the turn would then
 * answer again). Unconfirmed, the trigger is skipped like a failed one: the sweeper re-adds it.
 */
export async function triggerDelivery(
  deps: { deliver?: DeliveryTrigger | undefined; logger: Logger; store?: ChatStore },
  chatKey: string,
  log: Record<string, unknown> = {},
  mark?: WriteMark,
): Promise<void> {
  if (mark && deps.store) {
    try {
      await deps.store.confirmWrite(mark);
    } catch (err) {
      deps.logger.warn(
        { err, chatKey, ...log },
        'reply not confirmed on replicas; the sweeper will deliver it',
      );
      return;
    }
  }
  await deps.deliver?.(chatKey).catch((err: unknown) => {
    deps.logger.warn({ err, chatKey, ...log }, 'delivery trigger failed; the sweeper will re-add it');
  });
}
