import type { SplitReply } from '../../shared/delivery/render/format.js';
import type { ReplyRoute } from '../../shared/delivery/route.js';
import { canStream, type Sender, type SendRequest, type SendResult } from '../../shared/delivery/sender.js';
import type { Logger } from '../../shared/logger.js';
import { type Metrics, recordDelivery, recordDeliveryFailure } from '../../shared/metrics.js';
import type { OutboxItem } from '../../shared/store/chat-store.js';
import type { AdvanceResult, DeliveryStore, PartCursor, StreamedPost } from '../../shared/store/delivery.js';
import { inSpan } from '../../shared/tracing/spans.js';

/**
 * One outbox item, sent as the messages its sender splits it into (a chat platform's limit
 * and dialect: src/shared/delivery/render), in order. It stays one outbox item with one cursor:
 * - each part the receiver accepted is recorded (`delivery-part`: compare-and-set under the
 *   lease) before the next is sent; the last one moves the chat's cursor past the item
 *   (`delivery-advance`, which records `delivery.split` when there were several);
 * - a retry, or another worker after a crash, resumes at the first part not recorded, from
 *   the same split (the part cursor names its format and part count);
 * - each part gets DELIVERY_MAX_ATTEMPTS attempts; giving up on one skips the rest of the
 *   item (`delivery.failed` says which part, and how many went out).
 * At-least-once per part, as per item: a crash between the receiver accepting a part and its
 * record sends that part again; a crash between parts sends nothing twice.
 */

export interface ItemContext {
  store: DeliveryStore;
  logger: Logger;
  metrics?: Metrics;
  chatKey: string;
  owner: string;
  leaseMs: number;
  route: ReplyRoute;
  sender: Sender | undefined;
  maxAttempts: number;
  /** One send within DELIVERY_TIMEOUT_MS, over the streamed post when one waits; never throws. */
  send(request: Omit<SendRequest, 'signal'>, post: StreamedPost | undefined): Promise<SendResult>;
}

type Refusal = Exclude<SendResult, { status: 'ok' }>;

export type ItemOutcome =
  | { kind: 'done'; failed: boolean }
  | { kind: 'retry'; result: Extract<SendResult, { status: 'retry' }>; tries: number }
  | { kind: 'lost'; moved?: Extract<AdvanceResult, { ok: false }> };

export interface ItemPosition {
  /** The chat's cursor: the item is the next one after it. */
  cursor: string;
  /** Failed attempts already made at the item's next part. */
  headTries: number;
  /** The item's part cursor, when it is partly sent. */
  part: PartCursor | undefined;
  /** A streamed post waiting for this item (PLATFORM_STREAMING): its first part is shown through it. */
  waiting: StreamedPost | undefined;
}

export async function deliverItem(
  ctx: ItemContext,
  item: OutboxItem,
  at: ItemPosition,
): Promise<ItemOutcome> {
  const { chatKey, route, sender } = ctx;
  let split: SplitReply | undefined;
  if (sender?.split) {
    const got = await sender
      .split({ chatKey, route, item, ...(at.part && { format: at.part.format }) })
      .catch(
        (err: unknown): Refusal => ({ status: 'retry', reason: `split threw: ${(err as Error)?.message}` }),
      );
    if (!('parts' in got)) {
      return failed(ctx, item, at, got, { index: at.part?.sent ?? 0, count: at.part?.parts ?? 1 });
    }
    split = got;
  }
  const count = split?.parts.length ?? 1;
  let start = at.part?.sent ?? 0;
  if (at.part && (!split || at.part.format !== split.format || at.part.parts !== count)) {
    // Recorded by another version of the split: its parts cannot be matched to these, so all
    // of it again (a repeat rather than a gap).
    if (split) {
      ctx.logger.warn(
        { itemId: item.id, had: at.part, now: { format: split.format, parts: count } },
        'the split of a partly delivered reply changed; sending it from its first part',
      );
    }
    start = 0;
  }
  /** Parts the part cursor counts (compared by every step). */
  let recorded = at.part?.sent ?? 0;
  for (let index = start; index < count; index++) {
    const attempt = index === start ? at.headTries + 1 : 1;
    const reply = split?.parts[index];
    const t0 = performance.now();
    const result: SendResult = sender
      ? await inSpan(
          'chatlane.delivery.attempt',
          {
            // In the trace of the span that wrote the item; the platform or webhook POST is its client span.
            parent: item.traceparent,
            attributes: {
              'chatlane.chat_key': chatKey,
              'chatlane.outbox_item': item.id,
              'chatlane.delivery.channel': route.channel,
              'chatlane.delivery.attempt': attempt,
              ...(count > 1 && { 'chatlane.delivery.part': index + 1, 'chatlane.delivery.parts': count }),
            },
          },
          async (span) => {
            const sent = await ctx.send(
              { chatKey, route, item, attempt, ...(reply && { part: { index, count, reply } }) },
              index === 0 && canStream(sender) ? at.waiting : undefined,
            );
            span?.setAttribute('chatlane.delivery.result', sent.status);
            return sent;
          },
        )
      : { status: 'retry', reason: `no sender for channel '${route.channel}' in this process` };
    const seconds = (performance.now() - t0) / 1000;
    if (result.status !== 'ok') {
      return failed(ctx, item, { ...at, headTries: attempt - 1 }, result, {
        index,
        count,
        recorded,
        seconds,
      });
    }
    if (index < count - 1) {
      ctx.metrics?.deliverySendDuration.observe({ channel: route.channel }, seconds);
      const moved = await ctx.store.advancePart(
        ctx.chatKey,
        ctx.owner,
        at.cursor,
        item.id,
        { sentBefore: recorded, sent: index + 1, parts: count, format: split!.format },
        ctx.leaseMs,
      );
      if (!moved.ok) return { kind: 'lost', moved };
      recorded = index + 1;
      continue;
    }
    if (ctx.metrics) {
      recordDelivery(ctx.metrics, {
        channel: route.channel,
        result: 'delivered',
        seconds,
        lagSeconds: (Date.now() - item.ts) / 1000,
      });
    }
    const moved = await ctx.store.advance(ctx.chatKey, ctx.owner, at.cursor, item, ctx.leaseMs, undefined, {
      partsBefore: recorded,
      ...(count > 1 && {
        split: { itemId: item.id, channel: route.channel, parts: count, format: split!.format },
      }),
    });
    return moved.ok ? { kind: 'done', failed: false } : { kind: 'lost', moved };
  }
  throw new Error('an item has at least one part');
}

/** A part not accepted: counted and retried later, or given up on (the item skipped). */
async function failed(
  ctx: ItemContext,
  item: OutboxItem,
  at: ItemPosition,
  result: Refusal,
  where: { index: number; count: number; recorded?: number; seconds?: number },
): Promise<ItemOutcome> {
  const channel = ctx.route.channel;
  const attempt = at.headTries + 1;
  const giveUp = result.status === 'failed' || attempt >= ctx.maxAttempts;
  if (ctx.metrics) {
    recordDelivery(ctx.metrics, {
      channel,
      result: giveUp ? 'failed' : 'retry',
      seconds: where.seconds ?? 0,
    });
  }
  if (!giveUp) {
    const tries = await ctx.store.defer(ctx.chatKey, ctx.owner, item.id);
    if (tries === undefined) return { kind: 'lost' };
    return { kind: 'retry', result: result as Extract<SendResult, { status: 'retry' }>, tries };
  }
  const recorded = where.recorded ?? at.part?.sent ?? 0;
  const event = {
    itemId: item.id,
    channel,
    attempts: attempt,
    reason: result.status === 'failed' ? 'permanent' : 'attempts-exhausted',
    error: result.reason.slice(0, 500),
    ...(where.count > 1 && { part: where.index + 1, parts: where.count, partsSent: where.index }),
  };
  const moved = await ctx.store.advance(ctx.chatKey, ctx.owner, at.cursor, item, ctx.leaseMs, event, {
    partsBefore: recorded,
  });
  if (!moved.ok) return { kind: 'lost', moved };
  if (ctx.metrics) recordDeliveryFailure(ctx.metrics, channel);
  // One warn line per failed attempt: this last one, or 'delivery will be retried'.
  ctx.logger.warn({ ...event, attempt }, 'delivery failed; item skipped');
  return { kind: 'done', failed: true };
}
