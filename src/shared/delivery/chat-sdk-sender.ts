import { untilAborted } from '../abort.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { approvalCard } from '../platforms/approval-card.js';
import { type PlatformRuntime, startPlatformRuntime } from '../platforms/runtime.js';
import { closeRedis, createRedisClient } from '../redis.js';
import { type PlatformReplies, type ReplyPart, renderReply, type SplitReply } from './render/format.js';
import type { SendRequest, SendResult, SplitRequest, StreamingSender } from './sender.js';

const MAX_RETRY_AFTER_MS = 3600_000;

/**
 * A Chat SDK adapter's error as a delivery result, by the SDK's shared error classes
 * (`@chat-adapter/shared`; every official adapter throws them):
 * - AdapterRateLimitError (HTTP 429): retry after its `retryAfter` seconds (Telegram's
 *   `parameters.retry_after`), else the exponential backoff;
 * - PermissionError (403: bot blocked, kicked), ResourceNotFoundError (404 / chat gone),
 *   ValidationError (400: chat not found, message refused): failed, a retry cannot help;
 * - AuthenticationError (bad token), NetworkError (5xx, connection) and anything else: retry
 *   (an operator can fix a token; items wait through the attempts).
 */
export function classifySendError(err: unknown): SendResult {
  const e = err as { name?: string; message?: string; retryAfter?: unknown; code?: unknown };
  const reason = `${e?.name ?? 'Error'}: ${String(e?.message ?? err).slice(0, 300)}`;
  switch (e?.name) {
    case 'AdapterRateLimitError': {
      const seconds = typeof e.retryAfter === 'number' && e.retryAfter >= 0 ? e.retryAfter : undefined;
      return seconds === undefined
        ? { status: 'retry', reason }
        : { status: 'retry', reason, afterMs: Math.min(MAX_RETRY_AFTER_MS, seconds * 1000) };
    }
    case 'PermissionError':
    case 'ResourceNotFoundError':
    case 'ValidationError':
      return { status: 'failed', reason };
    default:
      return { status: 'retry', reason };
  }
}

/**
 * Delivers outbox items of chats that came in through a chat platform, to `route.threadId`
 * through the platform's Chat SDK adapter, so a forum topic's reply lands in the topic. The
 * item's Markdown becomes the platform's messages in one place, its module's reply format
 * (`split`, src/shared/delivery/render): delivery sends them one at a time and records each.
 * Also shows the bot as typing when asked (`typing`), where the module says its adapter can.
 */
export class ChatSdkSender implements StreamingSender {
  private readonly replies: () => Promise<PlatformReplies>;

  constructor(
    readonly channel: string,
    private readonly runtime: () => Promise<PlatformRuntime>,
    private readonly canType: boolean,
    replies: () => Promise<PlatformReplies>,
  ) {
    let loading: Promise<PlatformReplies> | undefined;
    this.replies = () => {
      loading ??= replies().catch((err: unknown) => {
        loading = undefined;
        throw err;
      });
      return loading;
    };
  }

  async split({ item, format }: SplitRequest): Promise<SplitReply | Exclude<SendResult, { status: 'ok' }>> {
    try {
      const [runtime, replies] = await Promise.all([this.runtime(), this.replies()]);
      const chosen =
        replies.formats.find((f) => f.id === format) ?? replies.choose(runtime.adapter(this.channel));
      const reply = renderReply(item.text, chosen);
      // A tool approval request is one card (its buttons answer it), never split: one part.
      return item.approval ? { format: reply.format, parts: reply.parts.slice(0, 1) } : reply;
    } catch (err) {
      return { status: 'retry', reason: `cannot split the reply now: ${(err as Error).message}` };
    }
  }

  async send({ chatKey, route, item, signal, part }: SendRequest): Promise<SendResult> {
    const threadId = route.threadId;
    if (!threadId) return { status: 'failed', reason: 'route has no threadId' };
    // Adapters do not take an abort signal for posts: stop waiting and let the item retry.
    return this.call(threadId, signal, 'send', async (runtime) => {
      const adapter = runtime.adapter(this.channel);
      if (item.approval) {
        // A tool approval request: Approve and Deny buttons; a card the adapter refuses (a
        // value too long for its buttons) goes as its rendered text, which says how to answer
        // in words.
        const card = approvalCard(item.approval, item.text, chatKey, this.channel);
        try {
          await adapter.postMessage(threadId, card);
          return { status: 'ok' };
        } catch (err) {
          if ((err as { name?: string }).name !== 'ValidationError') throw err;
        }
      }
      const replies = await this.replies();
      // Without a part (a caller that does not split): every part, in order.
      const parts = part ? [part.reply] : renderReply(item.text, replies.choose(adapter)).parts;
      for (const one of parts) {
        if (replies.post) await replies.post(adapter, threadId, one);
        else await adapter.postMessage(threadId, one.message);
      }
      return { status: 'ok' };
    });
  }

  /**
   * Posts text as it is written, through Chat SDK's streaming post
   * (`thread.post(AsyncIterable<string>)`): each adapter's own way (Telegram: drafts in a
   * private chat, else a post it edits; Slack: native streaming; Discord, Google Chat: a post
   * the SDK edits). `ok` carries the platform's id of the message that holds the text, which
   * a later edit to the committed text needs.
   */
  streamPost(
    threadId: string,
    texts: AsyncIterable<string>,
    signal: AbortSignal,
  ): Promise<SendResult & { messageId?: string }> {
    return this.call(threadId, signal, 'stream', async (runtime) => {
      const sent = await runtime.chat.thread(threadId).post(texts);
      return { status: 'ok', messageId: sent.id };
    });
  }

  /** Replaces the text of a message this bot posted (a streamed post gets its item's first part). */
  editPost(threadId: string, messageId: string, part: ReplyPart, signal: AbortSignal): Promise<SendResult> {
    return this.call(threadId, signal, 'edit', async (runtime) => {
      await runtime.adapter(this.channel).editMessage(threadId, messageId, part.message);
      return { status: 'ok' };
    });
  }

  /** Removes a message this bot posted (a streamed post no outbox item came for). */
  deletePost(threadId: string, messageId: string, signal: AbortSignal): Promise<SendResult> {
    return this.call(threadId, signal, 'delete', async (runtime) => {
      await runtime.adapter(this.channel).deleteMessage(threadId, messageId);
      return { status: 'ok' };
    });
  }

  /**
   * One platform call on the thread: the runtime, the call given up at `signal`
   * (DELIVERY_TIMEOUT_MS), its error classified, the thread's adapter state forgotten after.
   */
  private async call<R extends SendResult>(
    threadId: string,
    signal: AbortSignal,
    what: string,
    op: (runtime: PlatformRuntime) => Promise<R>,
  ): Promise<R | SendResult> {
    let runtime: PlatformRuntime;
    try {
      runtime = await this.runtime();
    } catch (err) {
      return { status: 'retry', reason: `platform runtime unavailable: ${(err as Error).message}` };
    }
    try {
      return await untilAborted(
        op(runtime),
        signal,
        () => new Error(`${what} aborted (DELIVERY_TIMEOUT_MS)`),
      );
    } catch (err) {
      return classifySendError(err);
    } finally {
      runtime.forget(this.channel, threadId);
    }
  }

  /** Shows the bot as typing in the thread (a few seconds on most platforms); never throws. */
  async typing(threadId: string): Promise<void> {
    if (!this.canType) return;
    try {
      const adapter = (await this.runtime()).adapter(this.channel);
      await adapter.startTyping(threadId);
    } catch {
      // Cosmetic: a failed typing indicator changes nothing about the reply.
    }
  }
}

/**
 * One Chat SDK runtime for every platform sender of a process, built on first use on its
 * own Redis connection (the delivery worker's is BullMQ's) and closed with the senders.
 */
export function lazyPlatformRuntime(config: Config, logger: Logger) {
  let building: Promise<{ runtime: PlatformRuntime; close(): Promise<void> }> | undefined;
  const build = async () => {
    const redis = createRedisClient(config, 'worker', 'chatlane:platforms');
    try {
      const runtime = await startPlatformRuntime(config, redis, logger);
      return {
        runtime,
        close: async () => {
          await runtime.close().catch(() => undefined);
          await closeRedis(redis);
        },
      };
    } catch (err) {
      await closeRedis(redis);
      throw err;
    }
  };
  return {
    get: async (): Promise<PlatformRuntime> => {
      building ??= build().catch((err: unknown) => {
        building = undefined;
        throw err;
      });
      return (await building).runtime;
    },
    close: async (): Promise<void> => {
      const current = building;
      building = undefined;
      if (current) await (await current.catch(() => undefined))?.close();
    },
  };
}
