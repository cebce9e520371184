import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Config } from '../config.js';
import { contactKey, contactName, contactsIndexKey } from '../keys.js';
import type { ChatMessage } from '../messages.js';
import { type ChatStore, type FencedResult, fieldsOf, type StreamEntry } from './chat-store.js';
import { scripts } from './scripts.js';

/**
 * The contact book: who chatlane has heard from, by username, and in which chat.
 *
 * Layout (every write a single-key command, so nothing here needs one slot):
 * - `P:{ct:<name>}` hash: chatKey → contact JSON, one key (one slot) per name, expiring
 *   CONTACTS_RETENTION_DAYS after anyone with that name was last seen;
 * - `P:contacts` zset: name → last seen, for listing and search, trimmed by the same
 *   retention (at most once a minute per process).
 * The ingest upserts it (throttled per process: at most once a minute per name and chat),
 * best effort like the activity index: it is written beside the ingest script, not in it.
 */

export const contactSchema = z.object({
  username: z.string(),
  chatKey: z.string(),
  channel: z.string().optional(),
  chatId: z.string().optional(),
  userId: z.string().optional(),
  lastSeen: z.number(),
});
export type Contact = z.infer<typeof contactSchema>;

export interface ContactBookOptions {
  retentionMs: number;
  /** How long a receiving chat remembers contact send ids (duplicates dropped). */
  dedupWindowMs: number;
}

/**
 * `relayError`: the send is recorded in the sending chat's relay but its write into the
 * target chat failed with this; the sweeper finishes it (once, by its send id).
 */
export type ContactSendResult = FencedResult<{
  sendId: string;
  itemId: string | undefined;
  routed: boolean;
  relayError?: unknown;
}>;

const TRIM_EVERY_MS = 60_000;

/** Search scans the name index in pages; this bounds one search's work. */
const SEARCH_SCAN_PAGES = 20;

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

export class ContactBook {
  private lastTrim = 0;

  constructor(
    private readonly store: ChatStore,
    private readonly options: ContactBookOptions,
  ) {}

  private get redis() {
    return this.store.redis;
  }

  /** The contact a message names, when it has a username. */
  static fromMessage(chatKey: string, message: ChatMessage, now: number): Contact | undefined {
    const m = message.metadata;
    if (!m?.username || !contactName(m.username)) return undefined;
    return {
      username: m.username,
      chatKey,
      ...(m.channel !== undefined && { channel: m.channel }),
      ...(m.chatId !== undefined && { chatId: m.chatId }),
      ...(m.userId !== undefined && { userId: m.userId }),
      lastSeen: now,
    };
  }

  async upsert(contact: Contact): Promise<void> {
    const name = contactName(contact.username);
    if (!name) return;
    const key = contactKey(this.store.prefix, name);
    const index = contactsIndexKey(this.store.prefix);
    const writes: Array<Promise<unknown>> = [
      this.redis.hset(key, contact.chatKey, JSON.stringify(contact)),
      this.redis.pexpire(key, this.options.retentionMs),
      this.redis.zadd(index, contact.lastSeen, name),
    ];
    // Trimming the index is housekeeping: once a minute per process is plenty.
    if (contact.lastSeen - this.lastTrim >= TRIM_EVERY_MS) {
      this.lastTrim = contact.lastSeen;
      writes.push(
        this.redis.zremrangebyscore(index, '-inf', `(${contact.lastSeen - this.options.retentionMs}`),
      );
    }
    await Promise.all(writes);
  }

  /** Everyone seen with exactly this name (case and a leading @ ignored), most recent first. */
  async lookup(username: string, now = Date.now()): Promise<Contact[]> {
    const name = contactName(username);
    if (!name) return [];
    return this.read([name], now);
  }

  /** Contacts whose name contains `query` (all when empty), most recent first, at most `limit`. */
  async search(query: string, limit: number, now = Date.now()): Promise<Contact[]> {
    const index = contactsIndexKey(this.store.prefix);
    const needle = query ? contactName(query) : undefined;
    let names: string[];
    if (!needle) {
      names = await this.redis.zrevrange(index, 0, limit - 1);
    } else {
      names = [];
      let cursor = '0';
      for (let page = 0; page < SEARCH_SCAN_PAGES && names.length < limit; page++) {
        const [next, found] = await this.redis.zscan(
          index,
          cursor,
          'MATCH',
          `*${globEscape(needle)}*`,
          'COUNT',
          500,
        );
        for (let i = 0; i < found.length; i += 2) names.push(found[i]!);
        cursor = next;
        if (cursor === '0') break;
      }
    }
    return (await this.read(names, now)).slice(0, limit);
  }

  private async read(names: string[], now: number): Promise<Contact[]> {
    const hashes = await Promise.all(names.map((n) => this.redis.hgetall(contactKey(this.store.prefix, n))));
    const out: Contact[] = [];
    for (const hash of hashes) {
      for (const raw of Object.values(hash)) {
        let value: unknown;
        try {
          value = JSON.parse(raw);
        } catch {
          continue;
        }
        const parsed = contactSchema.safeParse(value);
        if (parsed.success && now - parsed.data.lastSeen <= this.options.retentionMs) out.push(parsed.data);
      }
    }
    return out.sort((a, b) => b.lastSeen - a.lastSeen);
  }

  /**
   * chat_contact_send's write: the intent is recorded in the sending chat under the turn's
   * fence (contact-send.lua), then carried into the target chat's outbox (contact-receive.lua,
   * idempotent on the send id) and dropped from the relay. A crash in between leaves the
   * intent in the relay for `relayPending` (the sweeper) to finish: the message arrives once.
   */
  async send(
    from: { chatKey: string; fence: string; runId: string },
    to: Contact,
    text: string,
    ts = Date.now(),
  ): Promise<ContactSendResult> {
    const k = this.store.keys(from.chatKey);
    const sendId = randomUUID();
    const raw = (await scripts.contactSend.run(
      this.redis,
      [k.meta, k.relay, k.events],
      [from.fence, this.store.maxEvents, from.runId, sendId, to.chatKey, to.username, text, ts],
      this.store.events,
    )) as [string, string];
    if (raw[0] !== 'ok') return { ok: false, reason: 'fenced-out', detail: String(raw[1]) };
    try {
      const relayed = await this.relay(from.chatKey, [
        raw[1],
        ['sendId', sendId, 'to', to.chatKey, 'text', text, 'runId', from.runId, 'ts', String(ts)],
      ]);
      return { ok: true, sendId, itemId: relayed.itemId, routed: relayed.routed };
    } catch (relayError) {
      // Recorded, so it will arrive: a thrown error here would have the model send it again
      // under a new id, which the target's dedupe cannot recognise.
      return { ok: true, sendId, itemId: undefined, routed: false, relayError };
    }
  }

  /** Carry one relay entry into its target chat, then drop it from the sender's relay. */
  private async relay(fromChatKey: string, [entryId, fields]: StreamEntry) {
    const f = fieldsOf(fields);
    const to = f.get('to') ?? '';
    const t = this.store.keys(to);
    const raw = (await scripts.contactReceive.run(
      this.redis,
      [t.meta, t.outbox, t.events, t.relayed],
      [
        f.get('sendId') ?? '',
        fromChatKey,
        f.get('runId') ?? '',
        f.get('text') ?? '',
        f.get('ts') ?? '0',
        this.store.retention.outboxKeep,
        this.store.maxEvents,
        this.options.dedupWindowMs,
      ],
      this.store.events,
    )) as [string, string, number];
    await this.redis.xdel(this.store.keys(fromChatKey).relay, entryId);
    return { to, itemId: raw[0] === 'ok' ? String(raw[1]) : undefined, routed: Number(raw[2]) === 1 };
  }

  /** Finish sends a crash left in a chat's relay; returns the target chats written. */
  async relayPending(chatKey: string): Promise<Array<{ to: string; routed: boolean }>> {
    const entries = (await this.redis.xrange(
      this.store.keys(chatKey).relay,
      '-',
      '+',
      'COUNT',
      100,
    )) as StreamEntry[];
    const out: Array<{ to: string; routed: boolean }> = [];
    for (const entry of entries) {
      const r = await this.relay(chatKey, entry);
      out.push({ to: r.to, routed: r.routed });
    }
    return out;
  }
}

export function contactBookFromConfig(
  config: Pick<Config, 'CONTACTS_RETENTION_DAYS' | 'DEDUP_WINDOW_MS'>,
  store: ChatStore,
): ContactBook {
  return new ContactBook(store, {
    retentionMs: config.CONTACTS_RETENTION_DAYS * 24 * 3600 * 1000,
    dedupWindowMs: config.DEDUP_WINDOW_MS,
  });
}
