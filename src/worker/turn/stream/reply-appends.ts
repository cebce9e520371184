import type { ReplyAppend, ReplyStreams, ReplyWriteResult } from '../../../shared/store/reply-streams.js';

interface Pending {
  append: ReplyAppend;
  resolve: (result: ReplyWriteResult) => void;
  reject: (err: unknown) => void;
}

/** Replies one reply-append-many.lua call appends to at most: Redis serves nothing else while it runs. */
const APPEND_BATCH = 200;

/**
 * The appends a process's reply writers start in one go (the writes due at one flush tick)
 * become one script call (`ReplyStreams.appendMany`) instead of one each: a worker streaming
 * 50 replies sent about 20 appends a reply, each its own command, arguments and promise.
 * Appends are collected until the current task's microtasks run, so nothing waits longer than
 * it did; a writer has one write in flight, so a call never holds two of the same reply.
 */
export class ReplyAppends {
  private queue: Pending[] = [];

  constructor(private readonly replies: ReplyStreams) {}

  append(append: ReplyAppend): Promise<ReplyWriteResult> {
    return new Promise((resolve, reject) => {
      if (this.queue.push({ append, resolve, reject }) === 1) queueMicrotask(this.send);
    });
  }

  private readonly send = (): void => {
    const queue = this.queue;
    this.queue = [];
    for (let i = 0; i < queue.length; i += APPEND_BATCH) {
      const batch = queue.slice(i, i + APPEND_BATCH);
      this.replies.appendMany(batch.map((p) => p.append)).then(
        (results) => {
          for (const [j, p] of batch.entries()) {
            const result = results[j]!;
            if (typeof result === 'string') p.resolve(result);
            else p.reject(result.error);
          }
        },
        (err: unknown) => {
          for (const p of batch) p.reject(err);
        },
      );
    }
  };
}

const perStreams = new WeakMap<ReplyStreams, ReplyAppends>();

/** The process's appends to `replies`: one per ReplyStreams, shared by every writer on it. */
export function appendsOf(replies: ReplyStreams): ReplyAppends {
  let appends = perStreams.get(replies);
  if (!appends) {
    appends = new ReplyAppends(replies);
    perStreams.set(replies, appends);
  }
  return appends;
}
