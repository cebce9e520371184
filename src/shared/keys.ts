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
  /** stream: this chat's contact sends to other chats, until written there (chat_contact_send) */
  relay: string;
  /** zset: contact send id → time, for sends this chat received (idempotency) */
  relayed: string;
  /**
   * list: the chat_send items (JSON) of turns that have not committed yet. The next turn reads
   * it on acquire (a killed turn's replies are not said again); a commit clears it.
   */
  uncommitted: string;
  /** string: the chat's memory document (chat_memory_update), not history: survives compaction and switches */
  memory: string;
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
    relay: `${base}:relay`,
    relayed: `${base}:relayed`,
    uncommitted: `${base}:uncommitted`,
    memory: `${base}:memory`,
  };
}

/**
 * The same names as `chatKeys`, each built when it is read: a store call reads two to six of
 * the twelve, and builds them once per turn step rather than all of them every call.
 * Not a plain object: `Object.values` sees none of them (that is what `chatKeys` is for).
 */
export class ChatKeyNames implements ChatKeys {
  private readonly base: string;

  constructor(prefix: string, chatKey: string) {
    this.base = `${prefix}:{c:${chatKey}}`;
  }

  get inbox(): string {
    return `${this.base}:inbox`;
  }
  get seen(): string {
    return `${this.base}:seen`;
  }
  get hist(): string {
    return `${this.base}:hist`;
  }
  get meta(): string {
    return `${this.base}:meta`;
  }
  get archive(): string {
    return `${this.base}:archive`;
  }
  get outbox(): string {
    return `${this.base}:outbox`;
  }
  get events(): string {
    return `${this.base}:events`;
  }
  get contexts(): string {
    return `${this.base}:contexts`;
  }
  get relay(): string {
    return `${this.base}:relay`;
  }
  get relayed(): string {
    return `${this.base}:relayed`;
  }
  get uncommitted(): string {
    return `${this.base}:uncommitted`;
  }
  get memory(): string {
    return `${this.base}:memory`;
  }
}

/** The message list of one context snapshot (ids are generated, never user input). */
export function contextMessagesKey(prefix: string, chatKey: string, contextId: string): string {
  return `${prefix}:{c:${chatKey}}:ctx:${contextId}`;
}

/**
 * Every key a chat owns: what deleting the chat (CHAT_TTL_DAYS) deletes, atomically, in one
 * script. It is every field of `ChatKeys` plus one list per context snapshot, so a new
 * per-chat key belongs in `ChatKeys` (and under the chat's hash tag); keys of a chat that
 * are not fields there (named by an id, like snapshots) must be added here.
 */
export function allChatKeys(prefix: string, chatKey: string, contextIds: readonly string[]): string[] {
  return [
    ...Object.values(chatKeys(prefix, chatKey)),
    ...contextIds.map((id) => contextMessagesKey(prefix, chatKey, id)),
  ];
}

/** Best-effort index of chats by last activity (lives in its own slot, by design). */
export function chatsIndexKey(prefix: string): string {
  return `${prefix}:chats`;
}

/** BullMQ builds `<queuePrefix>:<queueName>:...`; the tag keeps one queue in one slot. */
export function queuePrefix(prefix: string, queueName: string): string {
  return `${prefix}:{q:${queueName}}`;
}

/**
 * A contact book name as a key part: NFKC, lowercase, without a leading `@`; characters that
 * could end a hash tag or a key segment (`{`, `}`, `:`, `%`, whitespace) percent-encoded.
 * undefined when nothing is left.
 */
export function contactName(username: string): string | undefined {
  const name = username.normalize('NFKC').trim().replace(/^@+/, '').toLowerCase();
  if (!name) return undefined;
  return name.replace(/[{}:%\s]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).slice(0, 200);
}

/** hash: chatKey → contact JSON, for everyone seen with one name (its own slot per name). */
export function contactKey(prefix: string, name: string): string {
  return `${prefix}:{ct:${name}}`;
}

/** zset: contact name → last seen (ms), for listing, search and trimming (one slot, like P:chats). */
export function contactsIndexKey(prefix: string): string {
  return `${prefix}:contacts`;
}

/**
 * The Chat SDK state adapter's own prefix (`@chat-adapter/state-ioredis` builds
 * `<this>:cache:<key>`, `<this>:lock:<thread>`, ...): platform adapters' short-lived claims,
 * polling checkpoints and locks live under chatlane's prefix, apart from chats' keys.
 */
export function chatSdkPrefix(prefix: string): string {
  return `${prefix}:chat-sdk`;
}

/** string: the fleet-wide lease of a platform's poller (`<fence>:<holder id>`), with a TTL; shares its slot with the fence. */
export function pollerLeaseKey(prefix: string, platform: string): string {
  return `${prefix}:{p:${platform}}:poller`;
}

/** counter: the fence of a platform's poller lease, incremented by every new holder. */
export function pollerFenceKey(prefix: string, platform: string): string {
  return `${prefix}:{p:${platform}}:poller-fence`;
}
