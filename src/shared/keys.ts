/**
 * The one place that builds Redis key names. Every key of a chat shares the hash tag
 * `{c:<chatKey>}` so each Lua script touches a single Cluster slot; each BullMQ queue gets
 * its own tag so queues spread over shards.
 */
export interface ChatKeys {
  inbox: string;
  seen: string;
  hist: string;
  meta: string;
  archive: string;
  outbox: string;
  events: string;
  /** hash: context snapshot id → its metadata JSON */
  contexts: string;
}

export function chatKeys(prefix: string, chatKey: string): ChatKeys {
  const base = `${prefix}:{c:${chatKey}}`;
  return {
    inbox: `${base}:inbox`,
    seen: `${base}:seen`,
    hist: `${base}:hist`,
    meta: `${base}:meta`,
    archive: `${base}:archive`,
    outbox: `${base}:outbox`,
    events: `${base}:events`,
    contexts: `${base}:contexts`,
  };
}

/** The message list of one context snapshot (ids are generated, never user input). */
export function contextMessagesKey(prefix: string, chatKey: string, contextId: string): string {
  return `${prefix}:{c:${chatKey}}:ctx:${contextId}`;
}

/** Best-effort index of chats by last activity (lives in its own slot, by design). */
export function chatsIndexKey(prefix: string): string {
  return `${prefix}:chats`;
}

/** BullMQ builds `<queuePrefix>:<queueName>:...`; the tag keeps one queue in one slot. */
export function queuePrefix(prefix: string, queueName: string): string {
  return `${prefix}:{q:${queueName}}`;
}
