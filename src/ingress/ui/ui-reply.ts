import type { ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger.js';
import { assistantMessageId } from '../../shared/messages.js';
import { chatEventOf } from '../../shared/store/chat-store.js';
import {
  isTerminalChunk,
  REPLY_WATCH_MS,
  type ReplyEntry,
  type ReplyStreams,
  replyEntryOf,
  runOfOwner,
} from '../../shared/store/reply-streams.js';
import type { HubEntry, StreamHub, Subscription } from '../stream/hub.js';

/**
 * The headers of an AI SDK UI message stream (`UI_MESSAGE_STREAM_HEADERS` in 'ai'), written
 * here rather than imported: the ingress only relays chunks the worker built with the SDK, and
 * loading the SDK's runtime into every ingress process for one constant is not worth it.
 */
export const UI_STREAM_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
} as const;

/** The framing of the SDK's JsonToSseTransformStream: one `data:` line per chunk, `[DONE]` last. */
function sse(chunk: unknown): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

export interface UiReplyDeps {
  hub: StreamHub;
  replies: ReplyStreams;
  logger: Logger;
  /** Longest wait for a turn to answer (UI_WAIT_MS); then the response ends with an error chunk. */
  waitMs: number;
  /** After the turn's end event, how long its closing chunk may take before the response ends anyway. */
  endGraceMs: number;
  heartbeatMs: number;
  /** Called once when the response is over (the process counts open responses). */
  onClose?: () => void;
}

// `turn.released`: a turn ended without a commit while the chat was watched (finish.lua).
const END_EVENTS = new Set(['turn.committed', 'turn.failed', 'turn.aborted', 'turn.released']);
const START_EVENTS = new Set(['reply.started', 'reply.merged']);

interface Start {
  runId: string;
  messageIds: string[];
}

/**
 * One `/v1/ui` response: the chunks of the turn(s) answering some message ids, as they are
 * written, relayed from the reply streams through the ingress's shared hub (one reader per
 * process, no polling per client).
 *
 * - It follows one reply at a time, from its first chunk; with `skipUntil`, chunks before the
 *   reply's marker for those ids are skipped (a message merged into a running turn gets that
 *   turn's remaining replies, opened by a `start` of its own).
 * - `finish` ends the response. `abort` (the turn lost its chat: a killed worker, taken
 *   over) is passed on, then the response follows the takeover's reply of the same messages.
 * - A turn that ended (its `turn.*` event) without closing its reply ends the response after
 *   `endGraceMs`: no client is left on a reply that will never end.
 * - A followed turn that wrote nothing to its reply (it did not stream) and lost the chat (a
 *   killed worker) leaves no `abort` and no `turn.*`: its `lease.takeover` names the run that
 *   took over, and the response follows that run's reply instead.
 */
export class UiReply {
  private res: ServerResponse | undefined;
  private readonly pending: string[] = [];
  private closed = false;
  private events: Subscription | undefined;
  private stopTail: (() => void) | undefined;
  private run: string | undefined;
  private skipUntil: Set<string> | undefined;
  private skipped = false;
  /** Whether the followed run's reply stream has given an entry yet. */
  private heard = false;
  /** Runs whose turn committed: an `abort` after that is another turn's open, not a lost reply. */
  private readonly committed = new Set<string>();
  /** A start of the same messages seen while another reply was still followed. */
  private nextStart: Start | undefined;
  private waitTimer: NodeJS.Timeout | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private watching: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: UiReplyDeps,
    readonly chatKey: string,
    /** The message ids whose answer this response carries (grows with the replies' markers). */
    private readonly about: Set<string>,
  ) {}

  /** Follow the chat's events: where the replies of `about` start, and when turns end. */
  async watchEvents(): Promise<void> {
    this.events = await this.deps.hub.subscribe(this.chatKey, undefined, (item) => this.onEvent(item));
  }

  /** Headers are the caller's; chunks written before this wait for it. */
  attach(res: ServerResponse): void {
    for (const text of this.pending.splice(0)) res.write(text);
    if (this.closed) {
      res.end();
      return;
    }
    this.res = res;
    res.on('close', () => this.close());
    this.heartbeat = setInterval(() => this.write(': heartbeat\n\n'), this.deps.heartbeatMs);
    this.heartbeat.unref();
    // While this response is open the chat is watched: the turns that start meanwhile stream.
    this.watching = setInterval(() => {
      this.deps.replies.watch(this.chatKey).catch((err: unknown) => {
        this.deps.logger.warn({ err, chatKey: this.chatKey }, 'chat watch refresh failed');
      });
    }, REPLY_WATCH_MS / 3);
    this.watching.unref();
  }

  /** Wait for a turn to start answering `about` (an accepted message, a stop resumed later). */
  awaitStart(): void {
    if (this.closed || this.run) return;
    clearTimeout(this.waitTimer);
    this.waitTimer = setTimeout(() => {
      this.write(sse({ type: 'error', errorText: 'no reply in time; the message stays queued' }));
      this.end();
    }, this.deps.waitMs);
    this.waitTimer.unref();
  }

  /** Follow `runId`'s reply from its first chunk (skipping to the marker of `skipUntil`, if given). */
  async follow(runId: string, skipUntil?: readonly string[]): Promise<void> {
    if (this.closed) return;
    clearTimeout(this.waitTimer);
    this.stopTail?.();
    this.run = runId;
    this.skipUntil = skipUntil ? new Set(skipUntil) : undefined;
    this.skipped = false;
    this.heard = false;
    const stop = await this.deps.hub.followKey(this.deps.replies.key(this.chatKey, runId), '0-0', (raw) => {
      const entry = replyEntryOf(raw);
      if (entry && this.run === runId) this.onEntry(runId, entry);
    });
    if (this.run === runId && !this.closed) this.stopTail = stop;
    else stop();
  }

  private onEntry(runId: string, entry: ReplyEntry): void {
    this.heard = true;
    if (entry.kind === 'answers') {
      for (const id of entry.messageIds) this.about.add(id);
      if (this.skipUntil && entry.messageIds.some((id) => this.skipUntil!.has(id))) {
        this.skipUntil = undefined;
        // Joined mid-reply: the client's message starts here.
        if (this.skipped) this.write(sse({ type: 'start', messageId: assistantMessageId(runId) }));
      }
      return;
    }
    if (this.skipUntil) {
      this.skipped = true;
      return;
    }
    if (entry.chunk.type === 'abort' && this.committed.has(runId)) {
      // The turn committed but died before its closing chunk; the next turn closed it for it.
      this.write(sse({ type: 'finish' }));
      this.end();
      return;
    }
    if (entry.chunk.type === 'error') {
      // The message failed for good: nothing more answers it.
      this.write(sse(entry.chunk));
      this.end();
      return;
    }
    this.write(sse(entry.chunk));
    if (!isTerminalChunk(entry)) return;
    if (entry.chunk.type === 'finish') {
      this.end();
      return;
    }
    // abort: this turn lost the chat; the takeover answers the same messages.
    this.stopTail?.();
    this.stopTail = undefined;
    this.run = undefined;
    clearTimeout(this.graceTimer);
    const next = this.nextStart;
    this.nextStart = undefined;
    if (next && next.runId !== runId) void this.followSafely(next.runId);
    else this.awaitStart();
  }

  private onEvent(item: HubEntry): void {
    if (item.stream !== 'events' || this.closed) return;
    const event = chatEventOf(item.entry);
    if (event.type === 'lease.takeover') {
      this.onTakeover(event.data);
      return;
    }
    const runId = typeof event.data.runId === 'string' ? event.data.runId : undefined;
    if (!runId) return;
    if (START_EVENTS.has(event.type)) {
      const ids = Array.isArray(event.data.messageIds) ? event.data.messageIds.map(String) : [];
      const hits = ids.filter((id) => this.about.has(id));
      if (hits.length === 0 || runId === this.run) return;
      if (this.run) {
        this.nextStart = { runId, messageIds: ids };
        return;
      }
      void this.followSafely(runId, event.type === 'reply.merged' ? hits : undefined);
      return;
    }
    if (event.type === 'turn.committed') this.committed.add(runId);
    if (END_EVENTS.has(event.type) && runId === this.run && !this.graceTimer) {
      // Its closing chunk is normally on its way (the same reader delivers it); if the turn's
      // process died between its commit and that chunk, the response still ends.
      this.graceTimer = setTimeout(() => {
        if (this.run !== runId) return;
        this.write(sse({ type: 'finish' }));
        this.end();
      }, this.deps.endGraceMs);
      this.graceTimer.unref();
    }
  }

  /**
   * The chat was taken over from an expired lease. A followed run that opened its reply gets
   * an `abort` from the takeover's open (onEntry goes on from there); one that wrote nothing
   * (it did not stream) gets nothing more, so the takeover's reply is followed from its start.
   * The chat is watched while this response is open, so the takeover streams, or writes its
   * whole reply at its commit.
   */
  private onTakeover(data: Record<string, unknown>): void {
    const dead = runOfOwner(data.previousOwner);
    const next = runOfOwner(data.owner);
    if (!dead || !next || dead !== this.run || this.heard || this.committed.has(dead)) return;
    void this.followSafely(next);
  }

  private async followSafely(runId: string, skipUntil?: readonly string[]): Promise<void> {
    try {
      await this.follow(runId, skipUntil);
    } catch (err) {
      this.deps.logger.warn({ err, chatKey: this.chatKey }, 'ui reply follow failed');
      this.write(sse({ type: 'error', errorText: 'the reply stream could not be read' }));
      this.end();
    }
  }

  private write(text: string): void {
    if (this.closed) return;
    // Before the response is attached, chunks wait (the reply may be under way already).

    if (this.res) this.res.write(text);
    else this.pending.push(text);
  }

  /** The response is complete: `[DONE]`, then the socket is released. */
  end(): void {
    if (this.closed) return;
    this.write('data: [DONE]\n\n');
    const res = this.res;
    this.close();
    if (res && !res.writableEnded) res.end();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.deps.onClose?.();
    clearTimeout(this.waitTimer);
    clearTimeout(this.graceTimer);
    clearInterval(this.heartbeat);
    clearInterval(this.watching);
    this.stopTail?.();
    this.events?.close();
    const res = this.res;
    if (res && !res.writableEnded) res.end();
  }
}
