import { Cluster } from 'ioredis';
import type { z } from 'zod';
import { encodeRoute, type ReplyRoute } from '../delivery/route.js';
import type { ChatlaneEventType, EVENT_DATA, EventSink } from '../events.js';
import { type ChatKeys, chatsIndexKey, lazyChatKeys } from '../keys.js';
import { type ChatMessage, parseStoredMessage } from '../messages.js';
import { type ReplicaAcks, ReplicationTimeoutError, type WriteMark } from '../replica-acks.js';
import { DEFAULT_STORE_RETENTION, type StoreRetention } from '../retention.js';
import { storedJson } from '../storable.js';
import { rangeStartAfter } from '../stream-id.js';
import { type CallUsage, usageArgs, usageWrite } from '../usage.js';
import {
  type AcquireResult,
  acquireBusy,
  acquireOk,
  type ChatEvent,
  chatEventOf,
  type FencedResult,
  fencedRefusal,
  fieldsOf,
  type HistoryWindow,
  type InboxEntry,
  type IngestLane,
  type IngestResult,
  type LeaseRenewal,
  MAX_UNCOMMITTED_SENDS,
  NO_READS,
  type OutboxItem,
  outboxPageOf,
  parseUncommitted,
  renewedSchema,
  type StoreOptions,
  type StreamEntry,
  type SweepState,
  streamIdTime,
  type TurnInput,
  tokensOf,
  tuple,
  turnInputOf,
} from './records.js';
import type { ReplyTail } from './reply-streams.js';
import { type RedisClient, scripts } from './scripts.js';

// The records live in records.ts; importers keep reading them from the store.
export type {
  AcquireResult,
  ChatEvent,
  FencedResult,
  HistoryWindow,
  InboxEntry,
  IngestLane,
  IngestResult,
  LaneState,
  LeaseRenewal,
  OutboxItem,
  StoreOptions,
  StreamEntry,
  SweepState,
  TurnInput,
  TurnReads,
  UncommittedSend,
} from './records.js';
export {
  chatEventOf,
  fencedRefusal,
  fieldsOf,
  MAX_UNCOMMITTED_SENDS,
  outboxItemOf,
  streamIdTime,
  tokensOf,
  tuple,
} from './records.js';

/** The XRANGE start of a page after `after` (from the first entry without it); undefined: nothing can follow. */
const rangeStart = (after: string | undefined) => (after ? rangeStartAfter(after) : '-');

/**
 * Every read and write of a chat's state. Writes of a turn go through fenced Lua scripts
 * (DESIGN §4); reads are plain commands parsed with zod.
 */
export class ChatStore {
  readonly prefix: string;
  readonly maxEvents: number;
  readonly retention: StoreRetention;
  /** Which UTC day usage and the daily budget count in. */
  readonly now: () => number;
  private readonly replicaAcks: ReplicaAcks | undefined;
  /** A program's onEvent (through EventFeed): every script of this store that writes events reports them here. */
  readonly events: EventSink | undefined;

  constructor(
    readonly redis: RedisClient,
    options: StoreOptions,
  ) {
    this.prefix = options.prefix;
    this.maxEvents = options.maxEvents;
    this.retention = { ...DEFAULT_STORE_RETENTION, ...options.retention };
    this.now = options.now ?? Date.now;
    this.replicaAcks = options.replicaAcks;
    this.events = options.events;
  }

  /**
   * REDIS_REPLICA_ACKS: before a write that must survive a failover, `markWrite`; after it,
   * `confirmWrite` resolves once the replicas have it (ReplicationTimeoutError otherwise).
   * Without the setting both do nothing.
   */
  markWrite(chatKey: string): WriteMark | undefined {
    return this.replicaAcks?.mark(this.redis, this.keys(chatKey).meta);
  }

  async confirmWrite(mark: WriteMark | undefined): Promise<void> {
    if (mark && this.replicaAcks) await this.replicaAcks.confirm(mark);
  }

  /**
   * REDIS_REPLICA_ACKS: throws ReplicationTimeoutError (`reconnected`) when the connection
   * serving `chatKey` changed since `mark` (a reconnect, another Cluster node) or is
   * reconnecting now: writes made before and not confirmed may be gone with a failed
   * primary. Without the setting, never.
   */
  assertSameConnection(chatKey: string, mark: WriteMark | undefined): void {
    const now = this.markWrite(chatKey);
    if (!mark || !now || !this.replicaAcks) return;
    // Not ready: a reconnect is under way, and a write now would go to whichever server
    // answers once it is done.
    const changed = now.connection !== mark.connection || now.readyCount !== mark.readyCount;
    if (changed || now.connection?.status !== 'ready') {
      throw new ReplicationTimeoutError(this.replicaAcks.replicas, 0, 0, 'reconnected');
    }
  }

  /** A chat's key names, each built when it is read (a call uses a few of them). */
  keys(chatKey: string): ChatKeys {
    return lazyChatKeys(this.prefix, chatKey);
  }

  /**
   * Store one user message once (idempotent on `message.id`). `route`, when given, becomes
   * the chat's reply route (written only if it changed); without one the route stays as it is.
   * `lane`: what the lane policy needs of the same script (the lane's state, a running turn told).
   */
  async ingest(
    chatKey: string,
    message: ChatMessage,
    limits: { maxPending: number; dedupWindowMs: number },
    route?: ReplyRoute,
    lane: IngestLane = {},
  ): Promise<IngestResult> {
    const k = this.keys(chatKey);
    const raw = tuple.parse(
      await scripts.ingest.run(
        this.redis,
        [k.inbox, k.seen, k.meta, k.outbox, k.watch],
        [
          message.id,
          // Throws UnstorableError (nested too deep) before anything is written.
          storedJson(message, { tooDeep: 'throw' }),
          limits.maxPending,
          limits.dedupWindowMs,
          route ? encodeRoute(route) : '',
          lane.state ? '1' : '',
          lane.notify?.channel ?? '',
          lane.notify?.maxInterrupts ?? 0,
          lane.watchMs ?? '',
        ],
      ),
    );
    if (raw[0] === 'accepted') {
      const streamId = String(raw[1]);
      if (raw.length < 5) return { status: 'accepted', streamId };
      const state = {
        leased: Number(raw[2]) === 1,
        oldestMs: streamIdTime(String(raw[3])),
        nowMs: Number(raw[4]),
      };
      return { status: 'accepted', streamId, lane: state };
    }
    if (raw[0] === 'duplicate') return { status: 'duplicate' };
    return { status: 'full', pending: Number(raw[1]) };
  }

  /** Best-effort activity index for the sweeper and listings (another slot: not atomic). */
  async touchChat(chatKey: string, at = Date.now()): Promise<void> {
    await this.redis.zadd(chatsIndexKey(this.prefix), at, chatKey);
  }

  /**
   * Take the chat's lease and, in the same script, read `reads` of it for the turn (nothing
   * by default: an operator or a test that only wants the lease).
   */
  async acquire(chatKey: string, owner: string, leaseMs: number, reads = NO_READS): Promise<AcquireResult> {
    const k = this.keys(chatKey);
    const reply = await scripts.acquire.run(
      this.redis,
      [k.meta, k.events, k.uncommitted, k.hist, k.inbox, k.memory, k.archive, k.contexts, k.watch],
      [owner, leaseMs, this.maxEvents, reads.windowMessages, reads.maxPending],
      this.events,
    );
    // Not a z.union: trying 'busy' first would build a failed parse on every acquire.
    if (Array.isArray(reply) && reply[0] === 'busy') return { ok: false, ttlMs: acquireBusy.parse(reply)[1] };
    const [
      ,
      fence,
      sends,
      route,
      head,
      window,
      histLen,
      pending,
      memory,
      archived,
      contexts,
      uiRun,
      watched,
    ] = acquireOk.parse(reply);
    return {
      ok: true,
      fence: String(fence),
      uncommitted: sends.flatMap(parseUncommitted),
      route: route ?? undefined,
      input: turnInputOf(head, window, { histLen, archived, contexts }, pending, memory),
      openReply: uiRun ?? undefined,
      watched: watched === 1,
    };
  }

  async renew(
    chatKey: string,
    owner: string,
    fence: string,
    leaseMs: number,
    runId: string,
  ): Promise<boolean> {
    const k = this.keys(chatKey);
    const res = await scripts.renew.run(
      this.redis,
      [k.meta, k.events],
      [owner, fence, leaseMs, this.maxEvents, runId],
      this.events,
    );
    return Number(res) === 1;
  }

  /**
   * `renew` for many chats' leases in one script call (a worker's renewals due at one check),
   * in order; per-lease calls on Redis Cluster, where the chats' keys are in different slots.
   */
  async renewMany(leases: readonly LeaseRenewal[]): Promise<boolean[]> {
    if (this.redis instanceof Cluster) {
      return Promise.all(leases.map((l) => this.renew(l.chatKey, l.owner, l.fence, l.leaseMs, l.runId)));
    }
    const keys: string[] = [];
    const args: Array<string | number> = [this.maxEvents];
    for (const l of leases) {
      const k = this.keys(l.chatKey);
      keys.push(k.meta, k.events);
      args.push(l.owner, l.fence, l.leaseMs, l.runId);
    }
    const renewed = renewedSchema.parse(await scripts.renewMany.run(this.redis, keys, args, this.events));
    if (renewed.length !== leases.length)
      throw new Error(`renew-many answered ${renewed.length} of ${leases.length} leases`);
    return renewed.map((n) => n === 1);
  }

  /**
   * The fenced commit of a turn. With `releaseAs` (the lease's owner token) the same script
   * releases the lease (as `finish` does) and says how many messages are still pending.
   */
  async commit(
    chatKey: string,
    fence: string,
    turn: {
      runId: string;
      consumed: string[];
      messages: ChatMessage[];
      event?: Record<string, unknown>;
      releaseAs?: string;
      /** The turn's model calls: counted in the chat's usage and put on turn.committed. */
      usage?: CallUsage[];
      /** The reply's last entries: the reply stream is closed by the commit, or not at all. */
      reply?: ReplyTail;
      /** The turn's tool approval plan (approvals.ts `approvalPlanJson`): written with the commit. */
      approvals?: string;
    },
  ): Promise<
    FencedResult<{ histLen: number; tokens: number; released: boolean; pending: number; cards: number }>
  > {
    const k = this.keys(chatKey);
    const raw = tuple.parse(
      await scripts.commit.run(
        this.redis,
        [
          k.meta,
          k.hist,
          k.inbox,
          k.events,
          k.uncommitted,
          k.usage,
          turn.reply?.key ?? k.meta,
          k.approvals,
          k.approvalsDone,
          k.outbox,
          k.watch,
        ],
        [
          fence,
          this.maxEvents,
          turn.runId,
          tokensOf(turn.messages),
          storedJson(turn.event ?? {}, { tooDeep: 'clip' }),
          turn.releaseAs ?? '',
          ...this.usageArgs(turn.usage),
          turn.reply?.maxLen ?? '',
          turn.reply?.ttlMs ?? '',
          turn.approvals ?? '',
          turn.reply?.unstreamed ? JSON.stringify(turn.reply.unstreamed) : '',
          turn.reply?.fields.length ?? 0,
          ...(turn.reply?.fields.flat() ?? []),
          turn.consumed.length,
          ...turn.consumed,
          // The model's own output (tool inputs) is clipped, never a reason to fail the turn.
          ...turn.messages.map((m) => storedJson(m, { tooDeep: 'clip' })),
        ],
        this.events,
      ),
    );
    if (raw[0] === 'ok') {
      return {
        ok: true,
        histLen: Number(raw[1]),
        tokens: Number(raw[2]),
        released: Number(raw[3]) === 1,
        pending: Number(raw[4]),
        cards: Number(raw[5] ?? 0),
      };
    }
    return fencedRefusal(raw);
  }

  /**
   * Fenced outbox write. `routed` says the chat has a reply route: the caller then triggers
   * the chat's delivery job (chats without a route are read over the API only). With `seen`
   * (chat_send) the item is also recorded as uncommitted until the turn commits, and
   * `arrived` says whether the inbox held a message after `seen` at the write (always true
   * without `seen`). With `reply`, its entries are appended to the turn's reply stream in the
   * same script, and `stop` says an operator asked this fence to stop.
   */
  async sendOutbox(
    chatKey: string,
    fence: string,
    item: {
      runId: string;
      text: string;
      ts: number;
      seen?: string | undefined;
      traceparent?: string | undefined;
      /** The chat_send's tool call id (its reply stream part). */
      part?: string | undefined;
      /** Reply entries not yet written: the send's text part so far. */
      reply?: ReplyTail | undefined;
    },
  ): Promise<FencedResult<{ id: string; routed: boolean; arrived: boolean; stop: boolean }>> {
    const k = this.keys(chatKey);
    const { reply } = item;
    const raw = tuple.parse(
      await scripts.outbox.run(
        this.redis,
        [k.meta, k.outbox, k.events, k.uncommitted, k.inbox, reply?.key ?? k.meta],
        [
          fence,
          this.maxEvents,
          this.retention.outboxKeep,
          item.runId,
          item.text,
          item.ts,
          item.seen === undefined ? '' : '1',
          item.seen ?? '',
          MAX_UNCOMMITTED_SENDS,
          item.traceparent ?? '',
          item.part ?? '',
          reply?.maxLen ?? '',
          reply?.ttlMs ?? '',
          ...(reply?.fields.flat() ?? []),
        ],
        this.events,
      ),
    );
    if (raw[0] === 'ok')
      return {
        ok: true,
        id: String(raw[1]),
        routed: Number(raw[2]) === 1,
        arrived: Number(raw[3]) !== 0,
        stop: Number(raw[4]) === 1,
      };
    return { ok: false, reason: 'fenced-out', detail: String(raw[1]) };
  }

  /**
   * Release the lease (fenced). `usage`: model calls of the turn that no commit or fail
   * wrote; recorded only if this call releases the lease.
   */
  async finish(
    chatKey: string,
    fence: string,
    owner: string,
    runId: string,
    usage?: CallUsage[],
  ): Promise<{ ok: boolean; pending: number }> {
    const k = this.keys(chatKey);
    const raw = tuple.parse(
      await scripts.finish.run(
        this.redis,
        [k.meta, k.inbox, k.events, k.usage, k.watch],
        [fence, owner, this.maxEvents, runId, ...this.usageArgs(usage)],
        this.events,
      ),
    );
    return { ok: raw[0] === 'ok', pending: Number(raw[1]) };
  }

  /** The script arguments of a usage write of `calls` now (day, keep-from day, calls). */
  usageArgs(calls: CallUsage[] | undefined): [string, string, string] {
    return usageArgs(calls && usageWrite(calls, this.retention.usageKeepDays, this.now()));
  }

  /** Pending messages, oldest first, strictly after `afterStreamId` when given. */
  async readInbox(chatKey: string, count: number, afterStreamId?: string): Promise<InboxEntry[]> {
    if (count <= 0) return [];
    const entries = await this.rangeAfter(this.keys(chatKey).inbox, afterStreamId, count);
    return entries.map(([streamId, fields]) => ({
      streamId,
      message: parseStoredMessage(fieldsOf(fields).get('m') ?? ''),
    }));
  }

  /** Has this chat ever taken a message (or been switched)? Its meta, history or inbox exists. */
  async chatExists(chatKey: string): Promise<boolean> {
    const k = this.keys(chatKey);
    return (await this.redis.exists(k.meta, k.hist, k.inbox)) > 0;
  }

  async pendingCount(chatKey: string): Promise<number> {
    return this.redis.xlen(this.keys(chatKey).inbox);
  }

  /** Pending count and lease state in one read (sweep-check.lua). */
  async sweepCheck(chatKey: string): Promise<SweepState> {
    const k = this.keys(chatKey);
    const raw = tuple.parse(
      await scripts.sweepCheck.run(this.redis, [k.meta, k.inbox, k.outbox, k.relay], []),
    );
    const lease = raw[0] === 'live' || raw[0] === 'expired' ? raw[0] : 'free';
    return {
      lease,
      pending: Number(raw[1] ?? 0),
      leaseMs: Number(raw[2] ?? 0),
      undelivered: Number(raw[3] ?? 0) === 1,
      relays: Number(raw[4] ?? 0),
    };
  }

  /**
   * The newest `size` history messages plus the summary at the head, in one round trip:
   * a turn costs O(window), never O(history).
   */
  async readHistoryWindow(chatKey: string, size: number): Promise<HistoryWindow> {
    return (await this.readTurnInput(chatKey, size, 0)).window;
  }

  /**
   * What a turn starts from, in one round trip: the history window (plus the summary at the
   * head), the oldest `maxPending` inbox entries and the chat's memory document (memory.ts).
   * A turn's first read comes with its lease (`acquire`); this one reads again (after a
   * compaction mid-turn).
   */
  async readTurnInput(chatKey: string, size: number, maxPending: number): Promise<TurnInput> {
    const k = this.keys(chatKey);
    const tx = this.redis
      .multi()
      .lindex(k.hist, 0)
      .lrange(k.hist, -size, -1)
      .llen(k.hist)
      .llen(k.archive)
      .hlen(k.contexts)
      .get(k.memory);
    if (maxPending > 0) tx.xrange(k.inbox, '-', '+', 'COUNT', maxPending);
    const res = (await tx.exec()) as Array<[unknown, unknown]>;
    return turnInputOf(
      res[0]![1] as string | null,
      res[1]![1] as string[],
      { histLen: Number(res[2]![1]), archived: Number(res[3]![1]), contexts: Number(res[4]![1]) },
      maxPending > 0 ? (res[6]![1] as StreamEntry[]) : [],
      res[5]![1] as string | null,
    );
  }

  /**
   * Stream entries strictly after the cursor (a stream id), oldest first. Not async: the
   * callers await it, a second suspended frame per read (held until Redis answers) buys nothing.
   */
  private rangeAfter(key: string, after: string | undefined, count: number): Promise<StreamEntry[]> {
    const start = rangeStart(after);
    if (start === undefined) return Promise.resolve([]);
    return this.redis.xrange(key, start, '+', 'COUNT', count) as Promise<StreamEntry[]>;
  }

  async readHistory(chatKey: string): Promise<ChatMessage[]> {
    const raw = await this.redis.lrange(this.keys(chatKey).hist, 0, -1);
    return raw.map(parseStoredMessage);
  }

  async readAllPending(chatKey: string): Promise<ChatMessage[]> {
    const entries = (await this.redis.xrange(this.keys(chatKey).inbox, '-', '+')) as StreamEntry[];
    return entries.map(([, fields]) => parseStoredMessage(fieldsOf(fields).get('m') ?? ''));
  }

  /** A page of the outbox, each item with `parts` when it went out as several messages. */
  async readOutbox(chatKey: string, after: string | undefined, limit: number): Promise<OutboxItem[]> {
    const start = rangeStart(after);
    if (start === undefined) return [];
    const k = this.keys(chatKey);
    return outboxPageOf(
      await this.redis.multi().xrange(k.outbox, start, '+', 'COUNT', limit).hgetall(k.parts).exec(),
    );
  }

  /** Records an event written from TypeScript; its data is checked against the type's schema (events.ts) by the compiler. */
  async appendEvent<T extends ChatlaneEventType>(
    chatKey: string,
    type: T,
    data: z.input<(typeof EVENT_DATA)[T]>,
  ): Promise<string> {
    const key = this.keys(chatKey).events;
    const json = storedJson(data, { tooDeep: 'clip' });
    const id =
      (await this.redis.xadd(key, 'MAXLEN', '~', this.maxEvents, '*', 'type', type, 'data', json)) ?? '';
    if (this.events && id) this.events([[key, id, type, json]]);
    return id;
  }

  async readEvents(chatKey: string, after: string | undefined, limit: number): Promise<ChatEvent[]> {
    const entries = await this.rangeAfter(this.keys(chatKey).events, after, limit);
    return entries.map(chatEventOf);
  }

  async readMeta(chatKey: string): Promise<Record<string, string>> {
    return this.redis.hgetall(this.keys(chatKey).meta);
  }
}
