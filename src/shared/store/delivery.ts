import { z } from 'zod';
import { decodeRoute, type ReplyRoute } from '../delivery/route.js';
import type { EventSink } from '../events.js';
import { lazyChatKeys } from '../keys.js';
import { DEFAULT_STORE_RETENTION } from '../retention.js';
import { type OutboxItem, outboxItemOf, type StreamEntry } from './chat-store.js';
import { type RedisClient, scripts } from './scripts.js';

/**
 * The delivery side of a chat's keys (DESIGN §11): its reply route and delivery cursor in the
 * meta hash, a delivery lease beside the turn lease, and the outbox after the cursor.
 * Every call is one script on the chat's slot. With streaming (PLATFORM_STREAMING) the
 * chat's `posts` hash rides along: what delivery streamed to the platform and not yet
 * matched to an outbox item.
 */

/** A post streamed from a reply's chat_send part, waiting for the outbox item it shows. */
export interface StreamedPost {
  /** The reply stream's text part (the chat_send's tool call id). */
  part: string;
  /** The platform's id of the message that holds the text. */
  msg: string;
  /** What the post shows. */
  text: string;
  end: 'complete' | 'cut';
}

/**
 * An outbox item split into several platform messages and partly sent (`meta.dPart`): the
 * next claim sends on from part `sent` (0-based) of the same split.
 */
export interface PartCursor {
  itemId: string;
  /** Parts that went out. */
  sent: number;
  /** Parts the item has. */
  parts: number;
  /** The split's format id (src/shared/delivery/render). */
  format: string;
}

const PART = /^(\S+) (\d+) (\d+) (\S+)$/;

function partOf(raw: unknown): PartCursor | undefined {
  const m = typeof raw === 'string' ? PART.exec(raw) : null;
  return m ? { itemId: m[1]!, sent: Number(m[2]), parts: Number(m[3]), format: m[4]! } : undefined;
}

/** The posts hash: the reply stream delivery follows, read up to `after`, and the post waiting. */
export interface PostsState {
  run?: string;
  after?: string;
  post?: StreamedPost;
  /** The reply stream part of the last item delivered (doneRun's): never streamed after that. */
  done?: { run: string; part: string };
}

const postSchema = z.object({
  part: z.string(),
  msg: z.string().min(1),
  text: z.string(),
  end: z.enum(['complete', 'cut']),
});

/** HGETALL's flat [field, value, ...] as a PostsState; an unreadable post is left out. */
function postsOf(raw: unknown): PostsState {
  const flat = z.array(z.string()).catch([]).parse(raw);
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]!] = flat[i + 1]!;
  const post = postSchema.safeParse(f);
  return {
    ...(f.run !== undefined && { run: f.run }),
    ...(f.after !== undefined && { after: f.after }),
    ...(post.success && { post: post.data }),
    ...(f.doneRun !== undefined && f.done !== undefined && { done: { run: f.doneRun, part: f.done } }),
  };
}

export type ClaimResult =
  | { status: 'none' }
  | { status: 'empty' }
  | { status: 'busy'; ttlMs: number }
  | {
      /** Streaming only: nothing committed waits, and a reply is live or a post waits; the lease is held. */
      status: 'stream';
      route: ReplyRoute | undefined;
      rawRoute: string;
      /** The run whose reply is live (its turn holds the chat), if any. */
      liveRun: string | undefined;
      posts: PostsState;
      /** Messages in the inbox that no turn has committed: a turn will still answer them. */
      unanswered: number;
    }
  | {
      status: 'ok';
      route: ReplyRoute | undefined;
      /** The raw stored route, for the log when it cannot be read. */
      rawRoute: string;
      cursor: string;
      /** Failed attempts already made at `items[0]` (at its next part; 0 when none). */
      headTries: number;
      items: OutboxItem[];
      /** The part cursor, when `items[0]` is partly sent. */
      part?: PartCursor;
      /** Streaming only. */
      posts?: PostsState;
    };

export type AdvanceResult = { ok: true } | { ok: false; reason: 'lost' | 'moved'; detail: string };

const head = z.tuple([z.string()]).rest(z.unknown());

/** A cursor script's answer: `ok`, or `lost` / `moved` with the owner or cursor found instead. */
function advanceResult(raw: z.infer<typeof head>): AdvanceResult {
  if (raw[0] === 'ok') return { ok: true };
  return { ok: false, reason: raw[0] === 'moved' ? 'moved' : 'lost', detail: String(raw[1] ?? '') };
}
const entrySchema = z.tuple([z.string(), z.array(z.string())]);

export class DeliveryStore {
  constructor(
    readonly redis: RedisClient,
    readonly prefix: string,
    readonly maxEvents: number,
    /** PLATFORM_STREAMING=on: claims and cursor moves carry the chat's posts hash. */
    readonly streaming = false,
    /** A program's onEvent: `delivery.failed` as the cursor move records it. */
    readonly events?: EventSink,
    /** OUTBOX_KEEP_ITEMS: the cap of the part counts the cursor move records. */
    readonly outboxKeep = DEFAULT_STORE_RETENTION.outboxKeep,
  ) {}

  /** Take the delivery lease and read up to `max` items after the cursor. */
  async claim(chatKey: string, owner: string, leaseMs: number, max: number): Promise<ClaimResult> {
    const k = lazyChatKeys(this.prefix, chatKey);
    const raw = head.parse(
      this.streaming
        ? await scripts.deliveryClaim.run(
            this.redis,
            [k.meta, k.outbox, k.posts, k.inbox],
            [owner, leaseMs, max, '1'],
          )
        : await scripts.deliveryClaim.run(this.redis, [k.meta, k.outbox], [owner, leaseMs, max]),
    );
    if (raw[0] === 'none') return { status: 'none' };
    if (raw[0] === 'empty') return { status: 'empty' };
    if (raw[0] === 'busy') return { status: 'busy', ttlMs: Number(raw[1]) };
    if (raw[0] === 'stream') {
      const [, rawRoute, live, posts, unanswered] = raw as [string, string, string, unknown, unknown];
      return {
        status: 'stream',
        route: decodeRoute(rawRoute),
        rawRoute: String(rawRoute),
        liveRun: live ? String(live) : undefined,
        posts: postsOf(posts),
        unanswered: Number(unanswered) || 0,
      };
    }
    const [, rawRoute, cursor, tryItem, tries, entries, rawPart, posts] = raw as [
      string,
      string,
      string,
      string,
      number,
      unknown,
      unknown,
      unknown,
    ];
    const items = z
      .array(entrySchema)
      .parse(entries)
      .map((e) => outboxItemOf(e as StreamEntry));
    const part = partOf(rawPart);
    return {
      status: 'ok',
      route: decodeRoute(rawRoute),
      rawRoute: String(rawRoute),
      cursor: String(cursor),
      headTries: items[0] && items[0].id === String(tryItem) ? Number(tries) : 0,
      items,
      ...(part && items[0]?.id === part.itemId && { part }),
      ...(this.streaming && { posts: postsOf(posts) }),
    };
  }

  /**
   * Move the cursor from `expected` to `itemId` (compare-and-set) and renew the lease.
   * `failed`, when given, is recorded as the item's `delivery.failed` event in the same script;
   * `split` (an item sent as several messages) as its `delivery.split` event and its part
   * count in the chat's `parts` hash (GET …/outbox shows it). `partsBefore`:
   * how many of the item's parts went out before this step, checked against its part cursor.
   */
  async advance(
    chatKey: string,
    owner: string,
    expected: string,
    item: Pick<OutboxItem, 'id' | 'runId' | 'part'>,
    leaseMs: number,
    failed?: Record<string, unknown>,
    opts: { split?: Record<string, unknown>; partsBefore?: number } = {},
  ): Promise<AdvanceResult> {
    const k = lazyChatKeys(this.prefix, chatKey);
    const raw = head.parse(
      await scripts.deliveryAdvance.run(
        this.redis,
        this.streaming
          ? [k.meta, k.events, k.parts, k.outbox, k.posts]
          : [k.meta, k.events, k.parts, k.outbox],
        [
          owner,
          expected,
          item.id,
          leaseMs,
          this.maxEvents,
          failed ? JSON.stringify(failed) : '',
          this.streaming ? item.runId : '',
          this.streaming ? (item.part ?? '') : '',
          opts.split ? JSON.stringify(opts.split) : '',
          opts.partsBefore ?? '',
          this.outboxKeep,
        ],
        this.events,
      ),
    );
    return advanceResult(raw);
  }

  /**
   * A part of `itemId` went out: its part cursor moves from `sentBefore` parts to `sent`
   * (compare-and-set, with the cursor still at `expected`), the lease is renewed and the
   * attempt count starts again for the next part.
   */
  async advancePart(
    chatKey: string,
    owner: string,
    expected: string,
    itemId: string,
    split: { sentBefore: number; sent: number; parts: number; format: string },
    leaseMs: number,
  ): Promise<AdvanceResult> {
    const k = lazyChatKeys(this.prefix, chatKey);
    const raw = head.parse(
      await scripts.deliveryPart.run(
        this.redis,
        [k.meta],
        [owner, expected, itemId, split.sentBefore, split.sent, split.parts, split.format, leaseMs],
      ),
    );
    return advanceResult(raw);
  }

  /**
   * Write the posts hash under the lease (renewed): `clear` drops the waiting post first,
   * `set` writes fields (none: only the lease is renewed). false when the lease is lost.
   */
  async post(
    chatKey: string,
    owner: string,
    leaseMs: number,
    change: { clear?: boolean; set?: Partial<Record<'run' | 'after' | keyof StreamedPost, string>> } = {},
  ): Promise<boolean> {
    const k = lazyChatKeys(this.prefix, chatKey);
    const args: Array<string | number> = [owner, leaseMs, change.clear ? '1' : ''];
    for (const [field, value] of Object.entries(change.set ?? {})) {
      if (value !== undefined) args.push(field, value);
    }
    const raw = head.parse(await scripts.deliveryPost.run(this.redis, [k.meta, k.posts], args));
    return raw[0] === 'ok';
  }

  /** The posts hash as stored (inspection and tests). */
  async posts(chatKey: string): Promise<PostsState> {
    const flat = await this.redis.hgetall(lazyChatKeys(this.prefix, chatKey).posts);
    return postsOf(Object.entries(flat).flat());
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

  /** The route, cursor and part cursor as stored (inspection and tests). */
  async state(chatKey: string): Promise<{
    route: ReplyRoute | undefined;
    deliveredTo: string | undefined;
    part: PartCursor | undefined;
  }> {
    const [route, deliveredTo, part] = await this.redis.hmget(
      lazyChatKeys(this.prefix, chatKey).meta,
      'route',
      'deliveredTo',
      'dPart',
    );
    return { route: decodeRoute(route), deliveredTo: deliveredTo ?? undefined, part: partOf(part) };
  }
}
