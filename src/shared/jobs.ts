import type { ConnectionOptions, QueueOptions } from 'bullmq';
import { z } from 'zod';
import { Queue } from './bullmq.js';
import { chatKeySchema } from './chat-key.js';
import { queuePrefix } from './keys.js';
import { bullmqTelemetry } from './tracing/spans.js';

/**
 * The job catalogue: one zod schema per queue, shared by producer and consumer. Jobs carry
 * only the chatKey; the data lives in the chat's keys.
 */
export const QUEUES = {
  turns: 'turns',
  compaction: 'compaction',
  deliveries: 'deliveries',
  /** Fleet-wide periodic jobs (the sweeper), kept off `turns` so they never wait behind turns. */
  maintenance: 'maintenance',
} as const;
export type QueueName = (typeof QUEUES)[keyof typeof QUEUES];

/** What each queue is for, as Bull Board shows it. */
export const QUEUE_DESCRIPTIONS: Record<QueueName, string> = {
  turns:
    "One job per chat with pending messages ({ chatKey }): a worker runs the chat's next turn. Deduplicated by chatKey; a chat never has two active jobs.",
  compaction:
    "Summarises the oldest part of a chat's history once it passes COMPACT_AT_TOKENS ({ chatKey }); run by compactors, never blocks a turn.",
  deliveries: "Sends a chat's outbox to the platform it came from, in order ({ chatKey }).",
  maintenance:
    'Fleet-wide periodic jobs: the sweeper re-adds chats that have pending messages but no live job or lease.',
};

export const turnJobSchema = z.object({ chatKey: chatKeySchema });
export type TurnJob = z.infer<typeof turnJobSchema>;

export const compactionJobSchema = z.object({ chatKey: chatKeySchema });
export type CompactionJob = z.infer<typeof compactionJobSchema>;

export const deliveryJobSchema = z.object({ chatKey: chatKeySchema });
export type DeliveryJob = z.infer<typeof deliveryJobSchema>;

/** States in which a chat's job will still run (and write to the chat). */
export const LIVE_JOB_STATES: ReadonlySet<string> = new Set([
  'waiting',
  'active',
  'delayed',
  'prioritized',
  'waiting-children',
]);

/**
 * Options of every Queue and Worker of chatlane. With tracing on, BullMQ's telemetry carries the
 * adding span's context in each job, so a job's processing joins the trace that asked for it.
 */
export function queueOptions(prefix: string, name: QueueName, connection: ConnectionOptions): QueueOptions {
  return { connection, prefix: queuePrefix(prefix, name), ...bullmqTelemetry() };
}

/** A Queue object for every queue of the catalogue (to watch them: Bull Board, queue metrics). */
export function watchQueues(prefix: string, connection: ConnectionOptions): Queue[] {
  return Object.values(QUEUES).map((name) => createQueue(prefix, name, connection));
}

export function createQueue<T>(prefix: string, name: QueueName, connection: ConnectionOptions): Queue<T> {
  return new Queue<T>(name, {
    ...queueOptions(prefix, name, connection),
    defaultJobOptions: {
      // Kept finished jobs would only cost memory: the chat's state is in its own keys.
      removeOnComplete: { count: 1000 },
      removeOnFail: { count: 5000 },
    },
  });
}

/**
 * Ask for a turn of this chat. While its job waits, the add is dropped; while it is
 * active, one follow-up is kept and created when the active one finishes (DESIGN §5), so
 * no trigger is lost and a chat never has two active jobs. Never `jobId = chatKey`: a kept
 * finished job would block later adds.
 *
 * `delayMs` > 0 (a debounced idle lane, lane-debounce.ts): the job is added delayed by that
 * much, or, when the chat's job already waits delayed, BullMQ moves it (`reschedule`: same
 * job, same attempts) to that far from now. A waiting job is left as it is: it runs soon and
 * its turn reads every pending message. An active one keeps the add as its follow-up, delayed
 * from when it finishes. `replace` was not used: it would make a new job of the delayed one,
 * with its attempts counted afresh.
 */
export async function enqueueTurn(queue: Queue<TurnJob>, chatKey: string, delayMs = 0): Promise<void> {
  await queue.add(
    'turn',
    { chatKey },
    {
      deduplication:
        delayMs > 0
          ? { id: chatKey, keepLastIfActive: true, reschedule: true }
          : { id: chatKey, keepLastIfActive: true },
      ...(delayMs > 0 && { delay: delayMs }),
      attempts: 5,
      backoff: { type: 'exponential', delay: 1000 },
    },
  );
}

export async function enqueueCompaction(queue: Queue<CompactionJob>, chatKey: string): Promise<void> {
  await queue.add(
    'compaction',
    { chatKey },
    {
      deduplication: { id: chatKey, keepLastIfActive: true },
      attempts: 8,
      backoff: { type: 'exponential', delay: 2000 },
    },
  );
}

/**
 * Ask for the chat's outbox to be delivered (after every outbox write of a chat with a reply
 * route). The same deduplication as turns: one delivery job per chat at a time, and an add
 * while it runs keeps one follow-up, so no trigger is lost. The job reads everything after
 * the chat's delivery cursor, so one job serves any number of writes.
 */
export async function enqueueDelivery(queue: Queue<DeliveryJob>, chatKey: string): Promise<void> {
  await queue.add(
    'deliver',
    { chatKey },
    {
      deduplication: { id: chatKey, keepLastIfActive: true },
      // Only for failures of the job itself (Redis): a receiver's failures are retried per
      // item, by delaying the job (DELIVERY_MAX_ATTEMPTS).
      attempts: 5,
      backoff: { type: 'exponential', delay: 1000 },
    },
  );
}

/** How long after a request's expiry its turn job runs: clocks of hosts differ by a little. */
const EXPIRY_MARGIN_MS = 2000;

/**
 * Ask for the chat's turn when a tool approval request expires (docs/approvals.md): a delayed
 * turn job of its own, one per request (never deduplicated with the chat's other turn jobs,
 * which it would hold back while it waits). A turn that finds the request still open then
 * denies it (`expired`); one that finds it settled does nothing.
 */
export async function scheduleApprovalExpiry(
  queue: Queue<TurnJob>,
  chatKey: string,
  approvalId: string,
  expiresAt: number,
): Promise<void> {
  await queue.add(
    'approval-expiry',
    { chatKey },
    {
      jobId: `approval-expiry-${approvalId}`,
      delay: Math.max(0, expiresAt - Date.now()) + EXPIRY_MARGIN_MS,
      attempts: 5,
      backoff: { type: 'exponential', delay: 1000 },
      removeOnComplete: true,
    },
  );
}
