/**
 * The one place that builds Redis key names. Every key of a chat shares the hash tag
 * `{c:<chatKey>}` so each Lua script touches a single Cluster slot; each BullMQ queue gets
 * its own tag so queues spread over shards.
 */

/** The names of a chat's keys, each `<prefix>:{c:<chatKey>}:<name>`. */
const CHAT_KEY_NAMES = [
  'inbox',
  'seen',
  'hist',
  'meta',
  'archive',
  'outbox',
  'events',
  // hash: context snapshot id → its metadata JSON
  'contexts',
  // stream: this chat's contact sends to other chats, until written there (chat_contact_send)
  'relay',
  // zset: contact send id → time, for sends this chat received (idempotency)
  'relayed',
  // list: the chat_send items (JSON) of turns that have not committed yet. The next turn reads
  // it on acquire (a killed turn's replies are not said again); a commit clears it.
  'uncommitted',
  // string: the chat's memory document (chat_memory_update), not history: survives compaction and switches
  'memory',
  // hash: model usage by `<day>|<model>|<kind>` and each day's budget total (src/shared/usage.ts)
  'usage',
  // hash: a tool's context.once key → its record JSON (`run` while fn runs, `done` with the
  // result); written only by the fenced once.lua (docs/design.md, "once")
  'once',
  // zset: once key → time of its record's last write (ms): retention and the per-chat cap
  'onceAt',
  // hash: delivery's streamed platform post (PLATFORM_STREAMING): `run` + `after` (which reply
  // stream it follows, read up to where), and while a post waits for its outbox item `part`,
  // `msg` (the platform's message id), `text` and `end`. Written only under the delivery lease.
  'posts',
  // hash: outbox item id → how many messages it went out as, for items delivered as several
  // (GET …/outbox `parts`). Written by delivery-advance.lua, which drops the fields of items
  // trimmed from the outbox once it holds more than OUTBOX_KEEP_ITEMS and a quarter.
  'parts',
  // string: exec_shell's workspace, a gzipped tar (EXEC_SHELL_WORKSPACE_MAX_BYTES before
  // compression), written fenced after each command that changed it (workspace-save.lua)
  'workspace',
  // hash: tool approval requests (docs/approvals.md): `<id>` the request JSON (the commit that
  // made it), `<id>:a` a person's answer (approval-answer.lua), `<id>:r` how it was settled
  'approvals',
  // zset: settled approval id → time: the oldest past a cap are forgotten with their fields
  'approvalsDone',
  // string: someone can watch the chat's replies (a POST /v1/ui's message or approval answer,
  // an open reply reader), with a short TTL the readers refresh: a turn that starts while it
  // exists streams its reply, and an unstreamed turn's commit writes the whole reply when it exists
  'watch',
] as const;

export type ChatKeys = Record<(typeof CHAT_KEY_NAMES)[number], string>;

/**
 * The chatKey of a chat's events key (`<prefix>:{c:<chatKey>}:events`), or undefined for any
 * other key. A chatKey holds no braces, so the tag ends at the first `}` after `{c:`.
 */
export function chatKeyOfEventsKey(prefix: string, key: string): string | undefined {
  const head = `${prefix}:{c:`;
  if (!key.startsWith(head) || !key.endsWith('}:events')) return undefined;
  const chatKey = key.slice(head.length, -'}:events'.length);
  return chatKey.length > 0 && !chatKey.includes('}') ? chatKey : undefined;
}

/** The hash tag every key of a chat shares: one Cluster slot per chat. */
function chatTag(prefix: string, chatKey: string): string {
  return `${prefix}:{c:${chatKey}}`;
}

/** Every key name of a chat, built now: for code that walks them (`allChatKeys`). */
export function chatKeys(prefix: string, chatKey: string): ChatKeys {
  const tag = chatTag(prefix, chatKey);
  return Object.fromEntries(CHAT_KEY_NAMES.map((name) => [name, `${tag}:${name}`])) as ChatKeys;
}

/** Getters for every name, on the prototype of `lazyChatKeys`' objects: built when read. */
const LAZY_NAMES: object = Object.defineProperties(
  {},
  Object.fromEntries(
    CHAT_KEY_NAMES.map((name) => [
      name,
      {
        get(this: { tag: string }) {
          return `${this.tag}:${name}`;
        },
      },
    ]),
  ),
);

/**
 * The same names as `chatKeys`, each built when it is read: a store call reads two to six of
 * the twenty-one, so it builds those rather than all of them every call. The names are
 * inherited getters: `Object.values` does not see them (that is what `chatKeys` is for).
 */
export function lazyChatKeys(prefix: string, chatKey: string): ChatKeys {
  const keys = Object.create(LAZY_NAMES) as { tag: string };
  keys.tag = chatTag(prefix, chatKey);
  return keys as unknown as ChatKeys;
}

/** The message list of one context snapshot (ids are generated, never user input). */
export function contextMessagesKey(prefix: string, chatKey: string, contextId: string): string {
  return `${chatTag(prefix, chatKey)}:ctx:${contextId}`;
}

/**
 * stream: the UI message chunks of one turn's reply (AI SDK `UIMessageChunk` JSON), the live
 * view `/v1/ui` serves. Named by the turn's run id, so it is not a field of `ChatKeys`: it
 * expires on its own (REPLY_STREAM_TTL_MS after the turn ends), which is why whole-chat
 * expiry need not name it.
 */
export function replyStreamKey(prefix: string, chatKey: string, runId: string): string {
  return `${chatTag(prefix, chatKey)}:ui:${runId}`;
}

/**
 * The Pub/Sub channel a running turn of the chat listens on for new messages
 * (LANE_POLICY=interrupt): the ingest script publishes "<streamId> <max interrupts>" there
 * while a turn holds the lease. A channel, not a key: it holds nothing, so whole-chat expiry
 * has nothing to delete; named under the chat's tag all the same.
 */
export function laneArrivalsChannel(prefix: string, chatKey: string): string {
  return `${chatTag(prefix, chatKey)}:arrivals`;
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

/**
 * string: the chatKey a signed generic webhook's `webhook-id` was stored in, for the
 * idempotency window: Standard Webhooks ids are unique per source, not per chat. Source names
 * and webhook ids carry no braces (config and route check them), so the tag holds.
 */
export function webhookIdKey(prefix: string, source: string, webhookId: string): string {
  return `${prefix}:{w:${source}}:id:${webhookId}`;
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

/** string: the key tool approval requests are signed with when TOOL_APPROVAL_SECRET is unset (store/approvals.ts). */
export function toolApprovalSecretKey(prefix: string): string {
  return `${prefix}:tool-approval-secret`;
}
