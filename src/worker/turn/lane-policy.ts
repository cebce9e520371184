import { z } from 'zod';
import { laneArrivalsChannel } from '../../shared/keys.js';
import type { Logger } from '../../shared/logger.js';
import type { RedisClient } from '../../shared/redis.js';
import type { ChatStore, InboxEntry } from '../../shared/store/chat-store.js';
import { compareStreamIds } from '../../shared/stream-id.js';
import type { LoopInput } from '../agent/loop.js';
import type { StepInterrupt } from '../agent/step-interrupt.js';

/** What the ingest script publishes: the new message's stream id and its channel's LANE_MAX_INTERRUPTS. */
const arrivalSchema = z
  .string()
  .regex(/^\d{1,20}-\d{1,20} \d{1,9}$/)
  .transform((payload) => {
    const [streamId, max] = payload.split(' ');
    return { streamId: streamId!, maxInterrupts: Number(max) };
  });

export type Arrival = z.output<typeof arrivalSchema>;

/**
 * LANE_POLICY=interrupt, the worker's side: one Redis Pub/Sub connection per worker process,
 * subscribed to the arrivals channel of each chat a turn of this process runs
 * (`laneArrivalsChannel`), on which the ingest script announces every message that found the
 * chat's turn running. Announcements are fire and forget: one lost (a reconnect, a message
 * that came before the subscription) only means the message is merged at the step's end.
 */
export class LaneArrivals {
  private readonly watchers = new Map<string, Set<(arrival: Arrival) => void>>();
  private closed = false;
  /**
   * Settles once the connection is ready. ioredis 5 (5.8.2 on; redis/ioredis#2037) can send a
   * SUBSCRIBE issued while it connects ahead of its own handshake (CLIENT SETINFO, the INFO
   * ready check): the ready check then fails, and the connection turns ready without being a
   * subscriber, so every later announcement is dropped for the life of the process.
   * Subscriptions and unsubscriptions wait here, in order; after a reconnect ioredis itself
   * subscribes again once ready.
   */
  private readonly ready: Promise<void>;

  constructor(
    /** A connection of its own (a subscriber can send nothing else), opened at start. */
    private readonly subscriber: RedisClient,
    private readonly prefix: string,
    private readonly logger: Logger,
  ) {
    subscriber.on('message', (channel: string, payload: string) => {
      const handlers = this.watchers.get(channel);
      if (!handlers) return;
      const arrival = arrivalSchema.safeParse(payload);
      if (!arrival.success) {
        logger.warn({ channel, payload: payload.slice(0, 100) }, 'unreadable lane arrival ignored');
        return;
      }
      for (const handler of handlers) handler(arrival.data);
    });
    this.ready =
      subscriber.status === 'ready'
        ? Promise.resolve()
        : new Promise((resolve) => subscriber.once('ready', () => resolve()));
  }

  /** Call `handler` for each announced arrival of the chat, until the returned function is called. */
  watch(chatKey: string, handler: (arrival: Arrival) => void): () => void {
    const channel = laneArrivalsChannel(this.prefix, chatKey);
    let handlers = this.watchers.get(channel);
    if (!handlers) {
      handlers = new Set();
      this.watchers.set(channel, handlers);
      this.whenReady(() => this.subscriber.subscribe(channel));
    }
    handlers.add(handler);
    const own = handlers;
    return () => {
      own.delete(handler);
      if (own.size > 0 || this.watchers.get(channel) !== own) return;
      this.watchers.delete(channel);
      this.whenReady(() => this.subscriber.unsubscribe(channel));
    };
  }

  private whenReady(command: () => Promise<unknown>): void {
    void this.ready
      .then(() => (this.closed ? undefined : command()))
      .catch((err: unknown) => this.failed(err));
  }

  private failed(err: unknown): void {
    this.logger.warn({ err }, 'lane arrivals subscription failed; new messages merge at step ends');
  }

  /** Idempotent: the subscriber connection is closed, watches end. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.watchers.clear();
    await this.subscriber.quit().catch(() => this.subscriber.disconnect());
  }
}

/** What the lane reads of its running turn when a message is announced. */
export interface InterruptTurn {
  /** The last inbox stream id the turn has given its model. */
  lastSeen(): string;
  /** Messages merged into the turn so far (MAX_MERGES_PER_TURN caps them). */
  merged(): number;
  maxMerges: number;
}

/**
 * Watch the chat for the turn's `interrupt`: an announced message the turn has not seen aborts
 * the model call under way, unless the turn already had its channel's LANE_MAX_INTERRUPTS
 * interrupts or took its MAX_MERGES_PER_TURN messages (then it is merged, or waits, as with
 * merge). Returns the unwatch.
 */
export function interruptOnArrival(
  arrivals: LaneArrivals,
  chatKey: string,
  turn: InterruptTurn,
  interrupt: StepInterrupt,
): () => void {
  return arrivals.watch(chatKey, ({ streamId, maxInterrupts }) => {
    if (compareStreamIds(streamId, turn.lastSeen()) <= 0) return;
    if (interrupt.count >= maxInterrupts || turn.merged() >= turn.maxMerges) return;
    interrupt.raise();
  });
}

/** What a turn gives the lane to be interrupted. */
export interface InterruptWiring {
  store: ChatStore;
  chatKey: string;
  runId: string;
  logger: Logger;
  interrupt: StepInterrupt;
  turn: InterruptTurn;
  /** Close what the aborted call had open in the live view (UiChunker.cut). */
  cut: () => void;
}

/**
 * A turn's interrupt, wired: the lane watches the chat for it (`interruptOnArrival`), the
 * loop's options restart an aborted step, and each interrupt closes the cut part of the live
 * view and is recorded (`lane.interrupted`, and the turn's log). `unwatch` when the loop ends.
 */
export function watchForInterrupts(
  arrivals: LaneArrivals,
  wiring: InterruptWiring,
): { loop: Pick<LoopInput<InboxEntry>, 'interrupt' | 'onInterrupt'>; unwatch: () => void } {
  const { store, chatKey, runId, logger, interrupt } = wiring;
  const unwatch = interruptOnArrival(arrivals, chatKey, wiring.turn, interrupt);
  return {
    unwatch,
    loop: {
      interrupt,
      onInterrupt: (items, step) => {
        // Readers see the cut part closed, then the restarted step.
        wiring.cut();
        const messageIds = items.map((e) => e.message.id);
        const interrupts = interrupt.count;
        logger.info({ step, messageIds, interrupts }, 'model call interrupted');
        void store
          .appendEvent(chatKey, 'lane.interrupted', { runId, step, messageIds, interrupts })
          .catch((err: unknown) => logger.warn({ err }, 'lane.interrupted event not written'));
      },
    },
  };
}
