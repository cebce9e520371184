import { Cluster } from 'ioredis';
import { z } from 'zod';
import type { EventSink } from '../events.js';
import { lazyChatKeys, replyStreamKey } from '../keys.js';
import { rangeStartAfter } from '../stream-id.js';
import { replyResultsSchema, type StreamEntry } from './records.js';
import { type RedisClient, scripts } from './scripts.js';

/**
 * The live view of a turn's reply: one Redis stream per turn (`replyStreamKey`) of AI SDK UI
 * message chunks, written by the worker as the model generates, read by any ingress for
 * `/v1/ui`. The committed outbox item and history stay the record; a reply stream is bounded
 * (MAXLEN ~) and expires a while after its turn ends.
 *
 * `meta.uiRun` names the turn whose reply is open (written, not yet closed): what a resuming
 * client replays. Every write is fenced: a worker that lost its chat writes nothing, and the
 * turn that took over closes the half reply with an `abort` chunk when it opens its own.
 */

/** A reply stream entry: a UI chunk, or a marker naming the message ids answered from here on. */
export type ReplyEntry =
  | { id: string; kind: 'chunk'; chunk: { type: string } & Record<string, unknown> }
  | { id: string; kind: 'answers'; messageIds: string[] };

export type ReplyWriteMode = 'open' | 'append' | 'close';
export type ReplyWriteResult = 'ok' | 'stop' | 'fenced-out';

/** What one write appends: `c` a chunk's JSON, `m` a JSON array of message ids. */
export type ReplyField = ['c' | 'm', string];

/** `appendMany`'s answer for one reply: as `write`'s, or the error of that reply's own call (Cluster). */
export type ReplyAppendResult = ReplyWriteResult | { error: unknown };

/** One reply's entries for `appendMany`, fenced on its own chat. */
export interface ReplyAppend {
  chatKey: string;
  fence: string | number;
  runId: string;
  fields: readonly ReplyField[];
}

/**
 * Reply entries another fenced script writes in its own call: the commit that puts the turn in
 * history closes the reply with them (commit.lua), a chat_send's outbox write appends the text
 * part it sends (outbox.lua). A round trip less each.
 */
export interface ReplyTail {
  key: string;
  maxLen: number;
  ttlMs: number;
  fields: readonly ReplyField[];
  /**
   * The turn did not stream: `fields` are its whole reply, written by the commit only if the
   * chat is watched by then (a reader came during the turn), announced as answering these ids.
   */
  unstreamed?: readonly string[];
}

export interface ReplyStreamOptions {
  prefix: string;
  maxEvents: number;
  /** MAXLEN ~ of one reply stream. */
  maxLen: number;
  /** How long a reply stream lives after its last write (REPLY_STREAM_TTL_MS). */
  ttlMs: number;
  /** A program's onEvent: `reply.started`, `reply.merged` and `turn.stop-requested` as written. */
  events?: EventSink | undefined;
}

/** The event a turn records when its reply opens or a merge joins it (read by `/v1/ui`). */
export interface ReplyEvent {
  type: 'reply.started' | 'reply.merged';
  data: { runId: string; messageIds: string[] };
}

const TERMINAL = new Set(['finish', 'abort']);

/** `finish` or `abort`: nothing of this reply follows. */
export function isTerminalChunk(entry: ReplyEntry): boolean {
  return entry.kind === 'chunk' && TERMINAL.has(entry.chunk.type);
}

/** One stream entry as a ReplyEntry; undefined for anything unreadable (never thrown at a reader). */
export function replyEntryOf([id, fields]: StreamEntry): ReplyEntry | undefined {
  const [field, value] = fields;
  if (value === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(value);
    if (field === 'c' && typeof parsed === 'object' && parsed !== null && 'type' in parsed) {
      return { id, kind: 'chunk', chunk: parsed as { type: string } & Record<string, unknown> };
    }
    if (field === 'm' && Array.isArray(parsed)) {
      return { id, kind: 'answers', messageIds: parsed.map(String) };
    }
  } catch {
    // A corrupt entry is skipped rather than ending every reader of the reply.
  }
  return undefined;
}

/**
 * How long a chat stays watched after a reader last said so: a /v1/ui message or approval
 * answer, an open reader (which refreshes it every third of this). Short, so a page that went
 * away stops costing its chat a streamed turn soon after.
 */
export const REPLY_WATCH_MS = 30_000;

/** The reply a reader that opens now follows: the open one (`streamed`), or the turn that does not stream. */
export interface WatchedRun {
  runId: string;
  streamed: boolean;
}

/** ui-watch.lua's reply: `{}` arrives as an empty array. */
const uiWatchReply = z.union([z.tuple([]), z.tuple([z.string(), z.number()])]);

/** The run of a turn lease owner token (`<worker>:<runId>`, turn.ts); undefined for anything else. */
export function runOfOwner(owner: unknown): string | undefined {
  if (typeof owner !== 'string') return undefined;
  const at = owner.lastIndexOf(':');
  return at < 0 || at === owner.length - 1 ? undefined : owner.slice(at + 1);
}

export class ReplyStreams {
  constructor(
    private readonly redis: RedisClient,
    readonly options: ReplyStreamOptions,
  ) {}

  key(chatKey: string, runId: string): string {
    return replyStreamKey(this.options.prefix, chatKey, runId);
  }

  /** What another script needs to write `fields` to `runId`'s reply in its own call. */
  tail(chatKey: string, runId: string, fields: readonly ReplyField[]): ReplyTail {
    return { key: this.key(chatKey, runId), maxLen: this.options.maxLen, ttlMs: this.options.ttlMs, fields };
  }

  /** The run whose reply is open now, if any (what a turn that opens its own must close). */
  async openRun(chatKey: string): Promise<string | undefined> {
    const run = await this.redis.hget(lazyChatKeys(this.options.prefix, chatKey).meta, 'uiRun');
    return run ?? undefined;
  }

  /**
   * The reply a resuming client should follow: the open one, while its turn still holds the
   * lease (live, or dead and not yet taken over: the takeover's `abort` ends it). A reply whose
   * turn released the lease without closing it (its process died right after the commit) is
   * not streaming: the history has it.
   */
  async liveRun(chatKey: string): Promise<string | undefined> {
    const [run, owner] = await this.redis.hmget(
      lazyChatKeys(this.options.prefix, chatKey).meta,
      'uiRun',
      'owner',
    );
    return run && runOfOwner(owner) === run ? run : undefined;
  }

  /**
   * Fenced append. `open` closes another turn's half reply (its `abort`, inside the script, so
   * a client following it is never left hanging): `openRun` names it as the caller read it
   * under its lease (null: none), else it is read here first.
   */
  async write(
    chatKey: string,
    fence: string | number,
    runId: string,
    mode: ReplyWriteMode,
    fields: readonly ReplyField[],
    event?: ReplyEvent,
    openRun?: string | null,
  ): Promise<ReplyWriteResult> {
    const k = lazyChatKeys(this.options.prefix, chatKey);
    const own = this.key(chatKey, runId);
    let previous = own;
    if (mode === 'open') {
      const run = openRun === undefined ? await this.openRun(chatKey) : openRun;
      if (run && run !== runId) previous = this.key(chatKey, run);
    }
    const args: Array<string | number> = [
      fence,
      runId,
      this.options.maxLen,
      this.options.ttlMs,
      this.options.maxEvents,
      mode,
      event?.type ?? '',
      event ? JSON.stringify(event.data) : '',
    ];
    for (const [field, value] of fields) args.push(field, value);
    const result = await scripts.replyWrite.run(
      this.redis,
      [k.meta, own, k.events, previous],
      args,
      this.options.events,
    );
    return result as ReplyWriteResult;
  }

  /**
   * `write`'s append for many replies in one script call (reply-append-many.lua: a worker's
   * writes due at one flush), each fenced on its own chat, answered in order. On Redis Cluster,
   * where the chats' keys are in different slots, each reply is its own call, and one that
   * fails is answered with its error while the others keep their results.
   */
  async appendMany(appends: readonly ReplyAppend[]): Promise<ReplyAppendResult[]> {
    if (this.redis instanceof Cluster) {
      return Promise.all(
        appends.map((a) =>
          this.write(a.chatKey, a.fence, a.runId, 'append', a.fields).catch((error: unknown) => ({ error })),
        ),
      );
    }
    const keys: string[] = [];
    const args: Array<string | number> = [this.options.maxLen, this.options.ttlMs];
    for (const a of appends) {
      keys.push(lazyChatKeys(this.options.prefix, a.chatKey).meta, this.key(a.chatKey, a.runId));
      args.push(a.fence, a.fields.length);
      for (const [field, value] of a.fields) args.push(field, value);
    }
    const results = replyResultsSchema.parse(await scripts.replyAppendMany.run(this.redis, keys, args));
    if (results.length !== appends.length)
      throw new Error(`reply-append-many answered ${results.length} of ${appends.length} replies`);
    return results;
  }

  /** Ask the chat's running turn to stop; `idle` when no turn holds the chat. */
  async requestStop(chatKey: string): Promise<'stopping' | 'idle'> {
    const k = lazyChatKeys(this.options.prefix, chatKey);
    const [status] = (await scripts.replyStop.run(
      this.redis,
      [k.meta, k.events],
      [this.options.maxEvents],
      this.options.events,
    )) as ['stopping' | 'idle', string];
    return status;
  }

  /**
   * A reader opens on the chat: the reply to follow while a turn holds the chat, and the chat
   * marked watched in the same script (an unstreamed turn's commit then writes its whole
   * reply). Undefined when no turn holds the chat (nothing is set).
   */
  async watchRun(chatKey: string): Promise<WatchedRun | undefined> {
    const k = lazyChatKeys(this.options.prefix, chatKey);
    const raw = uiWatchReply.parse(
      await scripts.uiWatch.run(this.redis, [k.meta, k.watch], [REPLY_WATCH_MS]),
    );
    return raw.length === 0 ? undefined : { runId: raw[0], streamed: raw[1] === 1 };
  }

  /** An open reader says the chat is still watched (one SET with its TTL). */
  async watch(chatKey: string): Promise<void> {
    await this.redis.set(lazyChatKeys(this.options.prefix, chatKey).watch, '1', 'PX', REPLY_WATCH_MS);
  }

  /** Entries after `after` (exclusive), oldest first. */
  async read(chatKey: string, runId: string, after = '0-0', count = 500): Promise<ReplyEntry[]> {
    const start = rangeStartAfter(after);
    if (start === undefined) return [];
    const raw = (await this.redis.xrange(
      this.key(chatKey, runId),
      start,
      '+',
      'COUNT',
      count,
    )) as StreamEntry[];
    const out: ReplyEntry[] = [];
    for (const e of raw) {
      const entry = replyEntryOf(e);
      if (entry) out.push(entry);
    }
    return out;
  }
}
