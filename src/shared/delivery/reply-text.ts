import { isSendTextStart } from '../store/reply-send-part.js';
import type { ReplyStreams } from '../store/reply-streams.js';

/**
 * One text part of a turn's reply stream (the UI message chunks the worker writes, see
 * docs/streaming.md) as the plain text deltas a Chat SDK streaming post takes
 * (`thread.post(AsyncIterable<string>)`), read live from Redis by polling, so it works the
 * same on a single Redis and on a Cluster (the stream is in the chat's slot).
 *
 * The stream is only the live view: how it ended tells delivery what the platform shows.
 * - `complete`: the part's `text-end` came; the post holds the whole text of that part.
 * - `cut`: the reply ended first (`abort` from a takeover, `error`, `finish`), or nothing new
 *   came for `idleMs` (a writer that died with no takeover yet): the post holds a half text,
 *   which the committed outbox item must still replace (an edit, or a fresh post).
 */
export type ReplyTextEnd = 'complete' | 'cut';

export interface ReplyTextOptions {
  /** The text part to follow (a chat_send's tool call id); default: the first one that starts. */
  partId?: string;
  /** Read the stream after this entry id (exclusive); default: from its start. */
  after?: string;
  /** Pause between reads while nothing new is there. */
  pollMs: number;
  /** Give up (as `cut`) after this long without a new entry. */
  idleMs: number;
  signal?: AbortSignal;
}

export interface ReplyTextFollow {
  /** The deltas, in order; ends with the part or the reply. */
  texts: AsyncIterable<string>;
  /** Set once `texts` has ended. */
  end(): ReplyTextEnd | undefined;
  /** The text read so far. */
  text(): string;
}

const REPLY_ENDS = new Set(['abort', 'error', 'finish']);

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

export function followReplyText(
  streams: ReplyStreams,
  chatKey: string,
  runId: string,
  options: ReplyTextOptions,
): ReplyTextFollow {
  let end: ReplyTextEnd | undefined;
  let text = '';
  let part = options.partId;

  async function* deltas(): AsyncGenerator<string, ReplyTextEnd> {
    let after = options.after ?? '0-0';
    let lastNews = Date.now();
    for (;;) {
      if (options.signal?.aborted) return 'cut';
      const entries = await streams.read(chatKey, runId, after);
      if (entries.length > 0) lastNews = Date.now();
      for (const entry of entries) {
        after = entry.id;
        if (entry.kind !== 'chunk') continue;
        const { chunk } = entry;
        if (REPLY_ENDS.has(chunk.type)) return 'cut';
        if (chunk.type === 'text-start' && part === undefined) part = String(chunk.id);
        if (chunk.id !== part) continue;
        if (chunk.type === 'text-delta' && typeof chunk.delta === 'string' && chunk.delta) {
          text += chunk.delta;
          yield chunk.delta;
        } else if (chunk.type === 'text-end') {
          return 'complete';
        }
      }
      if (entries.length === 0) {
        if (Date.now() - lastNews >= options.idleMs) return 'cut';
        await sleep(options.pollMs, options.signal);
      }
    }
  }

  async function* texts(): AsyncGenerator<string> {
    const it = deltas();
    for (;;) {
      const next = await it.next();
      if (next.done) {
        end = next.value;
        return;
      }
      yield next.value;
    }
  }

  return {
    texts: { [Symbol.asyncIterator]: () => texts() },
    end: () => end,
    text: () => text,
  };
}

/** A chat_send text part found in a reply stream. */
export interface SendPart {
  partId: string;
  /** The stream entry holding its `text-start`. */
  startId: string;
}

/**
 * The first chat_send text part after `after` that is still being written (its `text-start`
 * is there, its `text-end` not yet): the one a streaming post can follow from its start.
 * A part already complete is not followed: its outbox item is written right after, and is
 * delivered whole like any item. Plain assistant text parts never count.
 */
export async function findSendPart(
  streams: ReplyStreams,
  chatKey: string,
  runId: string,
  after = '0-0',
): Promise<SendPart | undefined> {
  const PAGE = 500;
  const open = new Map<string, string>();
  for (let from = after; ; ) {
    const entries = await streams.read(chatKey, runId, from, PAGE);
    for (const entry of entries) {
      from = entry.id;
      if (entry.kind !== 'chunk') continue;
      const { chunk } = entry;
      if (REPLY_ENDS.has(chunk.type)) return undefined;
      if (isSendTextStart(chunk)) open.set(String(chunk.id), entry.id);
      else if (chunk.type === 'text-end') open.delete(String(chunk.id));
    }
    if (entries.length < PAGE) break;
  }
  const [first] = open;
  return first && { partId: first[0], startId: first[1] };
}
