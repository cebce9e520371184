import { findSendPart, followReplyText, type SendPart } from '../../shared/delivery/reply-text.js';
import {
  canStream,
  type Sender,
  type SendRequest,
  type SendResult,
  type StreamingSender,
} from '../../shared/delivery/sender.js';
import type { Logger } from '../../shared/logger.js';
import type { ClaimResult, DeliveryStore, StreamedPost } from '../../shared/store/delivery.js';
import type { ReplyStreams } from '../../shared/store/reply-streams.js';

/**
 * PLATFORM_STREAMING=on (docs/platform-streaming.md): with the chat's delivery lease held and
 * nothing committed waiting, delivery follows the live reply's next chat_send text part into a
 * streaming post, and records the post in the chat's `posts` hash. The committed outbox item
 * stays the record: when it comes up, the waiting post either already shows its text (the
 * cursor moves, nothing is posted again) or is edited to it; a post no item came for is
 * removed once no turn's reply is live.
 */

/**
 * The longest wait between a streamed post's edits among the adapters (Telegram, in groups:
 * 3.1 s; in private chats 1.1 s; Chat SDK's post-and-edit fallback: 0.5 s).
 */
const MAX_EDIT_INTERVAL_MS = 3_100;

export interface StreamingSettings {
  replies: ReplyStreams;
  /** Pause between reads of the reply stream while nothing new is there. */
  pollMs: number;
  /** A writer silent this long ends the follow (as cut): a dead worker does not hold delivery. */
  idleMs: number;
  /** Longest one part is followed; then the post ends (as cut) and its item edits it later. */
  maxFollowMs: number;
}

export interface StreamContext {
  store: DeliveryStore;
  streaming: StreamingSettings;
  logger: Logger;
  chatKey: string;
  owner: string;
  leaseMs: number;
  /** DELIVERY_TIMEOUT_MS: one platform call's limit, and the post's after its text has ended. */
  timeoutMs: number;
}

export type StreamStep =
  | { kind: 'again' }
  | { kind: 'wait' }
  | { kind: 'lost' }
  | { kind: 'retry'; inMs: number | undefined; reason: string };

type StreamClaim = Extract<ClaimResult, { status: 'stream' }>;

/** One step with the lease held and nothing committed waiting. `again`: claim anew. */
export async function streamStep(
  ctx: StreamContext,
  claim: StreamClaim,
  sender: Sender | undefined,
): Promise<StreamStep> {
  const { route, liveRun, posts, unanswered } = claim;
  const threadId = route?.threadId;
  if (!threadId || !canStream(sender)) return { kind: 'wait' };
  const streamer = sender;
  if (posts.post) {
    // Its item, or a takeover's, may still come: a turn holds the chat, or messages wait for
    // one (a worker that died mid-reply leaves its messages in the inbox, and for a moment no
    // live reply, until the takeover opens its own).
    if (liveRun || unanswered > 0) return { kind: 'wait' };
    return removeStray(ctx, streamer, threadId, posts.post);
  }
  if (!liveRun) return { kind: 'wait' };
  const after = posts.run === liveRun ? posts.after : undefined;
  const part = await findSendPart(ctx.streaming.replies, ctx.chatKey, liveRun, after);
  if (!part) return { kind: 'wait' };
  if (posts.done?.run === liveRun && posts.done.part === part.partId) {
    // Its item came first (the outbox write can beat the part's end to Redis, or a takeover's
    // item went into the dead worker's post) and is delivered: read on past the part.
    return (await ctx.store.post(ctx.chatKey, ctx.owner, ctx.leaseMs, {
      set: { run: liveRun, after: part.startId },
    }))
      ? { kind: 'again' }
      : { kind: 'lost' };
  }
  // The part is taken before it is posted: never streamed twice, even after a crash mid-post
  // (then its item is posted whole, the duplicate at-least-once allows).
  if (
    !(await ctx.store.post(ctx.chatKey, ctx.owner, ctx.leaseMs, {
      set: { run: liveRun, after: part.startId },
    }))
  )
    return { kind: 'lost' };
  return streamPart(ctx, streamer, threadId, liveRun, part, after);
}

/** The turn ended and no item came for the post (a duplicate, the per-turn cap, a fenced-out send). */
async function removeStray(
  ctx: StreamContext,
  sender: StreamingSender,
  threadId: string,
  post: StreamedPost,
): Promise<StreamStep> {
  const removed = await bounded((signal) => sender.deletePost(threadId, post.msg, signal), ctx.timeoutMs);
  if (removed.status === 'retry') return { kind: 'retry', inMs: removed.afterMs, reason: removed.reason };
  // `failed`: already gone (deleted by a person, or too old to delete); nothing left to match either way.
  ctx.logger.info(
    { messageId: post.msg, part: post.part, ...(removed.status === 'failed' && { reason: removed.reason }) },
    removed.status === 'ok'
      ? 'streamed post without an outbox item removed'
      : 'streamed post without an outbox item could not be removed; left as it is',
  );
  return (await ctx.store.post(ctx.chatKey, ctx.owner, ctx.leaseMs, { clear: true }))
    ? { kind: 'again' }
    : { kind: 'lost' };
}

async function streamPart(
  ctx: StreamContext,
  sender: StreamingSender,
  threadId: string,
  runId: string,
  part: SendPart,
  readFrom: string | undefined,
): Promise<StreamStep> {
  const { store, chatKey, owner, leaseMs, timeoutMs, streaming } = ctx;
  const following = new AbortController();
  const posting = new AbortController();
  const timers: NodeJS.Timeout[] = [];
  // The lease outlives one send; a streamed post can take as long as the reply, so it is renewed.
  timers.push(
    setInterval(
      () => {
        void store.post(chatKey, owner, leaseMs).then(
          (held) => held || following.abort(),
          () => undefined,
        );
      },
      Math.max(100, Math.floor(timeoutMs / 2)),
    ),
  );
  timers.push(setTimeout(() => following.abort(), streaming.maxFollowMs));
  timers.push(setTimeout(() => posting.abort(), streaming.maxFollowMs + timeoutMs + MAX_EDIT_INTERVAL_MS));
  const follow = followReplyText(streaming.replies, chatKey, runId, {
    partId: part.partId,
    ...(readFrom !== undefined && { after: readFrom }),
    pollMs: streaming.pollMs,
    idleMs: streaming.idleMs,
    signal: following.signal,
  });
  async function* texts(): AsyncGenerator<string> {
    for await (const text of follow.texts) yield text;
    // The text has ended: the post's last edit or message gets one send's time, after the
    // adapter's own pacing of edits. Cut shorter, the post is made but not known here, and
    // the next part or the item would post beside it.
    timers.push(setTimeout(() => posting.abort(), timeoutMs + MAX_EDIT_INTERVAL_MS));
  }
  let result: SendResult & { messageId?: string };
  try {
    result = await sender.streamPost(threadId, texts(), posting.signal);
  } finally {
    following.abort();
    for (const t of timers) clearTimeout(t);
  }
  const end = follow.end() ?? 'cut';
  const log = { part: part.partId, runId, end, chars: follow.text().length };
  if (result.status === 'retry') {
    // A post the adapter made before its last call was refused is not known here: its item
    // is delivered whole, beside it.
    ctx.logger.warn({ ...log, reason: result.reason }, 'streamed post refused; its item is delivered whole');
    return { kind: 'retry', inMs: result.afterMs, reason: result.reason };
  }
  // A post made before any text came (the adapter's placeholder, say the writer died first)
  // is kept as well: its item edits it, instead of posting beside it.
  if (result.status === 'failed' || !result.messageId) {
    ctx.logger.warn(
      { ...log, reason: result.status === 'failed' ? result.reason : 'no message' },
      'nothing streamed to keep; its item is delivered whole',
    );
    return { kind: 'again' };
  }
  const recorded = await store.post(chatKey, owner, leaseMs, {
    set: { part: part.partId, msg: result.messageId, text: follow.text(), end },
  });
  ctx.logger.debug({ ...log, messageId: result.messageId }, 'reply streamed to the platform');
  return recorded ? { kind: 'again' } : { kind: 'lost' };
}

/**
 * The head item when a streamed post waits: the post already shows its text (the stream ended
 * on it, whole or cut exactly there, and the item is one message: an edit to the same text
 * would be refused as "not modified"), or is edited to the item's first message (the item's
 * other messages follow as posts of their own); a post that can no longer be edited (deleted)
 * gives way to a fresh one. This covers a takeover's item after a worker was killed mid-stream
 * too.
 */
export async function sendOverPost(
  sender: StreamingSender,
  request: SendRequest,
  post: StreamedPost,
): Promise<SendResult> {
  const threadId = request.route.threadId;
  if (!threadId) return { status: 'failed', reason: 'route has no threadId' };
  const part = request.part;
  if (!part) return sender.send(request);
  if (part.count === 1 && post.text === request.item.text) return { status: 'ok' };
  const edited = await sender.editPost(threadId, post.msg, part.reply, request.signal);
  if (edited.status !== 'failed') return edited;
  return sender.send(request);
}

/** One platform call given up after `timeoutMs` (as retry), like a send. */
async function bounded(
  call: (signal: AbortSignal) => Promise<SendResult>,
  timeoutMs: number,
): Promise<SendResult> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    return await call(signal);
  } catch (err) {
    return { status: 'retry', reason: `threw: ${(err as Error)?.message ?? err}` };
  }
}
