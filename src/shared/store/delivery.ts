import { z } from 'zod';
import { decodeRoute, type ReplyRoute } from '../delivery/route.js';
import { lazyChatKeys } from '../keys.js';
import { type OutboxItem, outboxItemOf, type StreamEntry } from './chat-store.js';
import { type RedisClient, scripts } from './scripts.js';

/**
 * The delivery side of a chat's keys (DESIGN §11): its reply route and delivery cursor in the
 * meta hash, a delivery lease beside the turn lease, and the outbox after the cursor.
 * Every call is one script on the chat's slot.
 */

export type ClaimResult =
  | { status: 'none' }
  | { status: 'empty' }
  | { status: 'busy'; ttlMs: number }
  | {
      status: 'ok';
      route: ReplyRoute | undefined;
      /** The raw stored route, for the log when it cannot be read. */
      rawRoute: string;
      cursor: string;
      /** Failed attempts already made at `items[0]` (0 when none). */
      headTries: number;
      items: OutboxItem[];
    };

export type AdvanceResult = { ok: true } | { ok: false; reason: 'lost' | 'moved'; detail: string };

const head = z.tuple([z.string()]).rest(z.unknown());
const entrySchema = z.tuple([z.string(), z.array(z.string())]);

export class DeliveryStore {
  constructor(
    readonly redis: RedisClient,
    readonly prefix: string,
    readonly maxEvents: number,
  ) {}

  /** Take the delivery lease and read up to `max` items after the cursor. */
  async claim(chatKey: string, owner: string, leaseMs: number, max: number): Promise<ClaimResult> {
    const k = lazyChatKeys(this.prefix, chatKey);
    const raw = head.parse(
      await scripts.deliveryClaim.run(this.redis, [k.meta, k.outbox], [owner, leaseMs, max]),
    );
    if (raw[0] === 'none') return { status: 'none' };
    if (raw[0] === 'empty') return { status: 'empty' };
    if (raw[0] === 'busy') return { status: 'busy', ttlMs: Number(raw[1]) };
    const [, rawRoute, cursor, tryItem, tries, entries] = raw as [
      string,
      string,
      string,
      string,
      number,
      unknown,
    ];
    const items = z
      .array(entrySchema)
      .parse(entries)
      .map((e) => outboxItemOf(e as StreamEntry));
    return {
      status: 'ok',
      route: decodeRoute(rawRoute),
      rawRoute: String(rawRoute),
      cursor: String(cursor),
      headTries: items[0] && items[0].id === String(tryItem) ? Number(tries) : 0,
      items,
    };
  }

  /**
   * Move the cursor from `expected` to `itemId` (compare-and-set) and renew the lease.
   * `failed`, when given, is recorded as the item's `delivery.failed` event in the same script.
   */
  async advance(
    chatKey: string,
    owner: string,
    expected: string,
    itemId: string,
    leaseMs: number,
    failed?: Record<string, unknown>,
  ): Promise<AdvanceResult> {
    const k = lazyChatKeys(this.prefix, chatKey);
    const raw = head.parse(
      await scripts.deliveryAdvance.run(
        this.redis,
        [k.meta, k.events],
        [owner, expected, itemId, leaseMs, this.maxEvents, failed ? JSON.stringify(failed) : ''],
      ),
    );
    if (raw[0] === 'ok') return { ok: true };
    return { ok: false, reason: raw[0] === 'moved' ? 'moved' : 'lost', detail: String(raw[1] ?? '') };
  }

  /** Count a failed attempt at `itemId` and release the lease; returns the attempts so far. */
  async defer(chatKey: string, owner: string, itemId: string): Promise<number | undefined> {
    const k = lazyChatKeys(this.prefix, chatKey);
    const raw = head.parse(await scripts.deliveryDefer.run(this.redis, [k.meta], [owner, itemId]));
    return raw[0] === 'ok' ? Number(raw[1]) : undefined;
  }

  async release(chatKey: string, owner: string): Promise<boolean> {
    const k = lazyChatKeys(this.prefix, chatKey);
    return Number(await scripts.deliveryRelease.run(this.redis, [k.meta], [owner])) === 1;
  }

  /** The route and cursor as stored (inspection and tests). */
  async state(chatKey: string): Promise<{ route: ReplyRoute | undefined; deliveredTo: string | undefined }> {
    const [route, deliveredTo] = await this.redis.hmget(
      lazyChatKeys(this.prefix, chatKey).meta,
      'route',
      'deliveredTo',
    );
    return { route: decodeRoute(route), deliveredTo: deliveredTo ?? undefined };
  }
}
