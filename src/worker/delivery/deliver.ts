import { randomUUID } from 'node:crypto';
import {
  canStream,
  type SenderRegistry,
  type SendRequest,
  type SendResult,
} from '../../shared/delivery/sender.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import type { DeliveryStore, StreamedPost } from '../../shared/store/delivery.js';
import { deliverItem } from './deliver-item.js';
import { type StreamingSettings, sendOverPost, streamStep } from './stream-posts.js';

/**
 * Delivery of one chat's outbox (DESIGN §11): the items after the chat's delivery cursor, in
 * outbox order, each through the sender of the chat's route (an item a chat platform needs
 * several messages for goes part by part, see deliver-item.ts). The cursor moves (compare-and-
 * set) only after the sender accepted an item, or when the item is given up on. A failing
 * receiver never holds a worker slot: the attempt is counted and the job is delayed (the
 * caller turns `retry` into a delayed BullMQ job), so other chats go on.
 *
 * Guarantees: at-least-once per item (a crash between acceptance and the cursor write sends
 * that item again, with the same id); items of a chat never overtake each other (one holder
 * of the chat's delivery lease at a time; the lease outlives any send that honours its
 * timeout); an item is skipped only after a permanent failure or DELIVERY_MAX_ATTEMPTS.
 */

export interface DeliverySettings {
  maxAttempts: number;
  backoffMs: number;
  backoffMaxMs: number;
  /** One send's limit (the sender's signal aborts then). */
  timeoutMs: number;
  /** Items read per claim. */
  batch: number;
  /** A job hands the chat back (re-queued behind other chats) after this many items ... */
  maxItemsPerJob: number;
  /** ... or this long. */
  maxJobMs: number;
}

export interface DeliveryDeps {
  store: DeliveryStore;
  senders: SenderRegistry;
  settings: DeliverySettings;
  workerId: string;
  logger: Logger;
  metrics?: Metrics;
  /** PLATFORM_STREAMING=on (with a DeliveryStore built for streaming): replies stream to platforms. */
  streaming?: StreamingSettings;
}

export type DeliveryOutcome =
  | { status: 'idle'; reason: 'no-route' | 'empty' | 'bad-route' }
  | { status: 'busy'; retryInMs: number }
  | { status: 'done'; delivered: number; failed: number; more: boolean }
  | { status: 'retry'; inMs: number; attempt: number; reason: string; delivered: number; failed: number }
  | { status: 'lost'; delivered: number; failed: number };

export const DELIVERY_DEFAULTS: Omit<
  DeliverySettings,
  'maxAttempts' | 'backoffMs' | 'backoffMaxMs' | 'timeoutMs'
> = {
  batch: 20,
  maxItemsPerJob: 100,
  maxJobMs: 10_000,
};

/**
 * The lease covers one send plus the Redis calls around it; it is renewed at every cursor
 * move. Twice the send timeout leaves room for a slow Redis answer.
 */
export function deliveryLeaseMs(timeoutMs: number): number {
  return 2 * timeoutMs + 1000;
}

/** Exponential backoff with ±20 % jitter, capped. `attempt` = failed attempts so far (≥ 1). */
export function backoffDelay(
  settings: Pick<DeliverySettings, 'backoffMs' | 'backoffMaxMs'>,
  attempt: number,
): number {
  const exp = Math.min(settings.backoffMaxMs, settings.backoffMs * 2 ** Math.max(0, attempt - 1));
  return Math.max(1, Math.round(exp * (0.8 + Math.random() * 0.4)));
}

/** One send, bounded by the timeout whether or not the sender honours its signal; never throws. */
export async function sendWithTimeout(
  send: (request: SendRequest) => Promise<SendResult>,
  request: Omit<SendRequest, 'signal'>,
  timeoutMs: number,
): Promise<SendResult> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<SendResult>((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error(`send timed out after ${timeoutMs}ms`));
      resolve({ status: 'retry', reason: `no answer within ${timeoutMs}ms` });
    }, timeoutMs);
  });
  try {
    return await Promise.race([
      send({ ...request, signal: controller.signal }).catch(
        (err: unknown): SendResult => ({
          status: 'retry',
          reason: `sender threw: ${(err as Error)?.message ?? err}`,
        }),
      ),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export async function deliverChat(deps: DeliveryDeps, chatKey: string): Promise<DeliveryOutcome> {
  const { store, settings, senders } = deps;
  const logger = deps.logger;
  const owner = `${deps.workerId}:${randomUUID()}`;
  const leaseMs = deliveryLeaseMs(settings.timeoutMs);
  const started = Date.now();
  let delivered = 0;
  let failed = 0;

  for (;;) {
    const claim = await store.claim(chatKey, owner, leaseMs, settings.batch);
    if (claim.status === 'none') return { status: 'idle', reason: 'no-route' };
    if (claim.status === 'empty') {
      return delivered + failed > 0
        ? { status: 'done', delivered, failed, more: false }
        : { status: 'idle', reason: 'empty' };
    }
    if (claim.status === 'busy') return { status: 'busy', retryInMs: claim.ttlMs };
    if (claim.status === 'stream') {
      const step = deps.streaming
        ? await streamStep(
            {
              store,
              streaming: deps.streaming,
              logger,
              chatKey,
              owner,
              leaseMs,
              timeoutMs: settings.timeoutMs,
            },
            claim,
            claim.route && senders.get(claim.route.channel),
          )
        : ({ kind: 'wait' } as const);
      if (step.kind === 'again') continue;
      if (step.kind === 'lost') return { status: 'lost', delivered, failed };
      await store.release(chatKey, owner);
      if (step.kind === 'retry') {
        const inMs = step.inMs !== undefined ? Math.max(1, step.inMs) : backoffDelay(settings, 1);
        return { status: 'retry', inMs, attempt: 0, reason: step.reason, delivered, failed };
      }
      // A trigger comes back: the item's outbox write, the next chat_send, or the reply's end.
      return delivered + failed > 0
        ? { status: 'done', delivered, failed, more: false }
        : { status: 'idle', reason: 'empty' };
    }
    const { route } = claim;
    if (!route) {
      // Written by a newer or broken version: leave the items where they are, say so loudly.
      logger.error({ route: claim.rawRoute.slice(0, 200) }, 'unreadable reply route; nothing delivered');
      await store.release(chatKey, owner);
      return { status: 'idle', reason: 'bad-route' };
    }
    const sender = senders.get(route.channel);
    let cursor = claim.cursor;
    let headTries = claim.headTries;
    let part = claim.part;
    // A streamed post waiting for its item: the head item is shown through it (stream-posts.ts).
    let waiting = canStream(sender) && route.threadId ? claim.posts?.post : undefined;
    const itemCtx = {
      store,
      logger,
      ...(deps.metrics && { metrics: deps.metrics }),
      chatKey,
      owner,
      leaseMs,
      route,
      sender,
      maxAttempts: settings.maxAttempts,
      send: (request: Omit<SendRequest, 'signal'>, post: StreamedPost | undefined) =>
        sendWithTimeout(
          (r) => (post && canStream(sender) ? sendOverPost(sender, r, post) : sender!.send(r)),
          request,
          settings.timeoutMs,
        ),
    };

    for (const item of claim.items) {
      const outcome = await deliverItem(itemCtx, item, { cursor, headTries, part, waiting });
      headTries = 0;
      part = undefined;
      waiting = undefined;
      if (outcome.kind === 'lost') {
        return outcome.moved
          ? lostWith(logger, outcome.moved, delivered, failed)
          : { status: 'lost', delivered, failed };
      }
      if (outcome.kind === 'retry') {
        const { result, tries } = outcome;
        const inMs =
          result.afterMs !== undefined ? Math.max(1, result.afterMs) : backoffDelay(settings, tries);
        logger.warn(
          { channel: route.channel, itemId: item.id, attempt: tries, inMs, reason: result.reason },
          'delivery will be retried',
        );
        return { status: 'retry', inMs, attempt: tries, reason: result.reason, delivered, failed };
      }
      cursor = item.id;
      if (outcome.failed) failed += 1;
      else delivered += 1;

      if (delivered + failed >= settings.maxItemsPerJob || Date.now() - started >= settings.maxJobMs) {
        await store.release(chatKey, owner);
        return { status: 'done', delivered, failed, more: true };
      }
    }
  }
}

function lostWith(
  logger: Logger,
  moved: { reason: string; detail: string },
  delivered: number,
  failed: number,
): DeliveryOutcome {
  // Another job took the chat over (we stalled past the lease): it resends from the cursor.
  logger.warn({ reason: moved.reason, detail: moved.detail }, 'delivery lease lost; another job continues');
  return { status: 'lost', delivered, failed };
}
