import { z } from 'zod';
import type { Logger } from './logger.js';

/**
 * The events a chat records (`P:{c:K}:events`, `GET /v1/chats/:chatKey/events`), as typed
 * objects: one zod schema per type, checked against what the TypeScript and Lua writers write
 * (test/integration/events.test.ts). A program using chatlane as a library gets them in code
 * (`startChatlane({ onEvent })`); docs/events.md lists them.
 *
 * The Lua writers encode with cjson, which writes an empty list as `{}`: list fields accept
 * that as the empty list.
 */

const luaList = <T extends z.ZodType>(item: T) =>
  z.union([z.array(item), z.strictObject({}).transform((): Array<z.output<T>> => [])]);

/** One model call's usage as events carry it: model, input, cached input, cache write, output, reasoning tokens. */
const callSchema = z.object({
  m: z.string(),
  i: z.number().optional(),
  c: z.number().optional(),
  w: z.number().optional(),
  o: z.number().optional(),
  r: z.number().optional(),
});
const calls = luaList(callSchema).optional();

/** The data of each event type. Unknown extra fields pass through (a newer writer may add some). */
export const EVENT_DATA = {
  /** A turn committed: its reply and the messages it answered are in history. */
  'turn.committed': z.looseObject({
    runId: z.string(),
    fence: z.string(),
    worker: z.string(),
    /** The user messages the turn answered, by id, in history order. */
    messageIds: luaList(z.string()),
    /** How many messages the turn consumed; `merged` of them joined it while it ran. */
    consumed: z.number(),
    merged: z.number(),
    /** Messages the turn appended (its assistant message(s)). */
    appended: z.number(),
    steps: z.number(),
    models: luaList(z.string()),
    /** chat_send calls the turn made; `earlierSends`, replies a crashed earlier run had sent. */
    sent: z.number(),
    earlierSends: z.number().optional(),
    inputMessages: z.number(),
    inputTokens: z.number().optional(),
    outputTokens: z.number().optional(),
    /** The history's token total after the commit. */
    tokens: z.number(),
    ms: z.number(),
    calls,
  }),
  /**
   * A turn failed. `reason` is a failure code (its messages are in history, marked failed, and
   * a notice was sent), `model_unavailable` (they wait for the model) or `retry` (the job retries).
   */
  'turn.failed': z.looseObject({
    runId: z.string(),
    reason: z.string(),
    error: z.string(),
    kind: z.string().optional(),
    fence: z.string().optional(),
    worker: z.string().optional(),
    messages: luaList(z.string()).optional(),
    consumed: z.number().optional(),
    notice: z.string().optional(),
    calls,
  }),
  /** Model calls of a turn that did not commit (a model failure, a stop), recorded at its release. */
  'turn.usage': z.looseObject({ runId: z.string(), fence: z.string(), calls }),
  /** A turn let a watched chat go without a commit: a reader waiting for its whole reply stops waiting. */
  'turn.released': z.looseObject({ runId: z.string(), fence: z.string() }),
  /** The provider refused the turn's input as too long: the chat is compacted and the turn retried once. */
  'turn.overflow': z.looseObject({ runId: z.string(), error: z.string() }),
  /** The worker shut down before the turn committed: another worker answers these messages. */
  'turn.aborted': z.looseObject({ runId: z.string(), reason: z.string() }),
  /** An operator asked the chat's running turn to stop. */
  'turn.stop-requested': z.looseObject({ fence: z.string() }),
  /**
   * A turn's reply began streaming (the live view), or an unstreamed turn's whole reply was
   * written with its commit for a reader; `messageIds` are the messages it answers.
   */
  'reply.started': z.looseObject({ runId: z.string(), messageIds: luaList(z.string()) }),
  /** Messages that arrived mid-turn joined the streaming reply. */
  'reply.merged': z.looseObject({ runId: z.string(), messageIds: luaList(z.string()) }),
  /**
   * LANE_POLICY=interrupt: messages aborted the turn's model call under way; `step` (from 0)
   * runs again with them (`messageIds`), `interrupts` counts this turn's so far.
   */
  'lane.interrupted': z.looseObject({
    runId: z.string(),
    step: z.number(),
    messageIds: luaList(z.string()),
    interrupts: z.number(),
  }),
  /** The chat is over CHAT_DAILY_TOKEN_BUDGET: its messages are kept and the model is not called. */
  'budget.exceeded': z.looseObject({
    runId: z.string(),
    fence: z.string(),
    consumed: z.number(),
    day: z.string(),
    used: z.number(),
    budget: z.number(),
    notice: z.string(),
  }),
  /** The Compressor cut the turn's input to fit MAX_INPUT_TOKENS. */
  'context.compressed': z.looseObject({
    runId: z.string(),
    originalCount: z.number(),
    keptCount: z.number(),
    originalTokens: z.number(),
    keptTokens: z.number(),
    budget: z.number(),
    truncatedCount: z.number(),
  }),
  'compaction.started': z.looseObject({
    messages: z.number(),
    tokens: z.number(),
    previousSummaryId: z.string().nullable(),
  }),
  'compaction.applied': z.looseObject({
    toId: z.string(),
    version: z.union([z.string(), z.number()]),
    summaryId: z.string().optional(),
    model: z.string().optional(),
    ms: z.number().optional(),
    summaryTokens: z.number().optional(),
    replacedTokens: z.number().optional(),
    calls,
  }),
  /** A summary was not applied: the history changed under it (it is recomputed) or it was already applied. */
  'compaction.discarded': z.looseObject({
    reason: z.enum(['already-applied', 'version', 'prefix-changed']),
    toId: z.string().optional(),
    expected: z.string().optional(),
    actual: z.string().optional(),
    calls,
  }),
  'context.new': contextSwitch(),
  'context.loaded': contextSwitch(),
  'context.cleared': contextSwitch(),
  'memory.updated': z.looseObject({
    runId: z.string(),
    tokens: z.number(),
    by: z.enum(['operator', 'turn']),
  }),
  /** A write of a turn that no longer holds the chat was refused (another turn took it over). */
  'fence.rejected': z.looseObject({
    op: z.string(),
    fence: z.string(),
    current: z.string(),
    runId: z.string().optional(),
  }),
  /** A turn took the chat over from a holder whose lease ran out (it stalled or died). */
  'lease.takeover': z.looseObject({
    previousOwner: z.string(),
    owner: z.string(),
    fence: z.union([z.string(), z.number()]),
    expiredMs: z.number(),
  }),
  /** The sweeper re-enqueued a chat whose messages had no turn job. */
  'sweep.requeued': z.looseObject({
    pending: z.number(),
    lease: z.string(),
    leaseMs: z.number().nullable().optional(),
    staleJobId: z.string().nullable(),
    staleJobState: z.string().nullable(),
  }),
  /** The sweeper re-enqueued the delivery of a chat with undelivered replies. */
  'sweep.delivery-requeued': z.looseObject({
    staleJobId: z.string().nullable(),
    staleJobState: z.string().nullable(),
  }),
  /** An outbox item was given up (a permanent refusal or attempts exhausted). */
  'delivery.failed': z.looseObject({
    itemId: z.string(),
    channel: z.string(),
    attempts: z.number(),
    reason: z.enum(['permanent', 'attempts-exhausted']),
    error: z.string(),
    /** A reply sent as several messages: the part given up on, of how many, and how many went out. */
    part: z.number().optional(),
    parts: z.number().optional(),
    partsSent: z.number().optional(),
  }),
  /** An outbox item too long for its platform went out whole, as several messages in order. */
  'delivery.split': z.looseObject({
    itemId: z.string(),
    channel: z.string(),
    parts: z.number(),
    format: z.string(),
  }),
  /** A tool's `context.once(key, fn)` stored fn's result: later calls with the key get it instead of running fn. */
  'once.stored': z.looseObject({
    key: z.string(),
    runId: z.string(),
    attempt: z.number(),
    bytes: z.number(),
    kept: z.boolean(),
  }),
  /** A `context.once` call found its key's result stored and returned it: fn did not run. */
  'once.reused': z.looseObject({ key: z.string(), runId: z.string(), attempt: z.number() }),
  /** exec_shell saved the chat's workspace after a command (`bytes` before compression, `stored` after). */
  'workspace.saved': z.looseObject({ runId: z.string(), bytes: z.number(), stored: z.number() }),
  /**
   * A tool call waits for a person (docs/approvals.md): the turn that made it committed with
   * the call's tool part in `approval-requested`. Answer it by `approvalId` before `expiresAt`.
   */
  'approval.requested': z.looseObject({
    approvalId: z.string(),
    toolCallId: z.string(),
    tool: z.string(),
    input: z.unknown(),
    runId: z.string(),
    /** The history message holding the call's tool part. */
    messageId: z.string(),
    expiresAt: z.number(),
    /** Why the rule asks (a reason the tool's `toolApproval` gave), when there is one. */
    reason: z.string().optional(),
  }),
  /**
   * An approval request was settled and its call's tool part is final in history: `approved`
   * (the tool ran, or failed), `denied` by a person, `expired` (TOOL_APPROVAL_TTL_MS) or
   * `superseded` (a new message came first, TOOL_APPROVAL_ON_MESSAGE=supersede).
   */
  'approval.resolved': z.looseObject({
    approvalId: z.string(),
    toolCallId: z.string(),
    tool: z.string(),
    outcome: z.enum(['approved', 'denied', 'expired', 'superseded']),
    runId: z.string(),
    reason: z.string().optional(),
    /** Who answered (`api`, `web`, `<platform>:<userId>`); absent for expired and superseded. */
    by: z.string().optional(),
  }),
  /** chat_contact_send sent to another chat. */
  'contact.sent': z.looseObject({
    sendId: z.string(),
    to: z.string(),
    username: z.string(),
    runId: z.string(),
  }),
  /** Another chat's turn sent this chat a message (chat_contact_send). */
  'contact.received': z.looseObject({ sendId: z.string(), from: z.string(), itemId: z.string() }),
} as const;

function contextSwitch() {
  return z.looseObject({
    runId: z.string(),
    archivedId: z.string().optional(),
    archivedCount: z.number().optional(),
    loadedId: z.string().optional(),
    loadedCount: z.number().optional(),
    droppedSnapshots: z.number().optional(),
  });
}

export type ChatlaneEventType = keyof typeof EVENT_DATA;

/** Every event type, in the order the catalogue lists them. */
export const EVENT_TYPES = Object.keys(EVENT_DATA) as ChatlaneEventType[];

/**
 * One event of one chat, as `GET /v1/chats/:chatKey/events` shows it plus its chat: `id` is the
 * event's stream id (a cursor for that endpoint), `ts` the time Redis recorded it (ms).
 * Switch on `type` to read `data` typed.
 */
export type ChatlaneEvent = {
  [T in ChatlaneEventType]: {
    id: string;
    chatKey: string;
    type: T;
    ts: number;
    data: z.output<(typeof EVENT_DATA)[T]>;
  };
}[ChatlaneEventType];

/** A program's event handler (`startChatlane({ onEvent })`). It may be async; chatlane never waits for it. */
export type EventHandler = (event: ChatlaneEvent) => void | Promise<void>;

/**
 * An event as a writer reports it: the events key, the stream id, the type, the data's JSON.
 * Lua scripts report theirs in this form (includes/events.lua), and so does `appendEvent`.
 */
export type WrittenEvent = [eventsKey: string, id: string, type: string, json: string];

/** Where a store hands the events it wrote (absent: the process has no handler). */
export type EventSink = (written: WrittenEvent[]) => void;

const isEventType = (type: string): type is ChatlaneEventType => Object.hasOwn(EVENT_DATA, type);

/** The stream id's time: the ms before the dash. */
const tsOf = (id: string) => Number(id.slice(0, id.indexOf('-')));

/**
 * An event's typed form, or a reason it has none: an unknown type, data that is not JSON or
 * does not match the type's schema.
 */
export function parseEvent(
  chatKey: string,
  id: string,
  type: string,
  json: string,
): { ok: true; event: ChatlaneEvent } | { ok: false; reason: string } {
  if (!isEventType(type)) return { ok: false, reason: `unknown event type ${type}` };
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return { ok: false, reason: 'data is not JSON' };
  }
  const data = EVENT_DATA[type].safeParse(raw);
  if (!data.success) return { ok: false, reason: z.prettifyError(data.error) };
  return { ok: true, event: { id, chatKey, type, ts: tsOf(id), data: data.data } as ChatlaneEvent };
}

/**
 * Hands the events a process writes to a program's handler: parsed and typed, in the order
 * they were written, each on its own (a throwing or rejecting handler is logged and never
 * reaches the writer, so it cannot fail a turn). The handler runs after the write's caller
 * has gone on (setImmediate), and is not awaited: a slow handler does not hold a turn. Events
 * are not replayed after a crash; the chat's events stream keeps them.
 */
export class EventFeed {
  readonly sink: EventSink;
  private queued: WrittenEvent[] = [];
  private scheduled = false;

  constructor(
    private readonly handler: EventHandler,
    private readonly logger: Logger,
    /** The chatKey of an events key (keys.ts chatKeyOfEventsKey). */
    private readonly chatKeyOf: (eventsKey: string) => string | undefined,
  ) {
    this.sink = (written) => {
      for (const w of written) this.queued.push(w);
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => this.drain());
    };
  }

  private drain(): void {
    this.scheduled = false;
    const batch = this.queued;
    this.queued = [];
    for (const [key, id, type, json] of batch) {
      const chatKey = this.chatKeyOf(key);
      const parsed =
        chatKey === undefined
          ? { ok: false as const, reason: 'not a chat events key' }
          : parseEvent(chatKey, id, type, json);
      if (!parsed.ok) {
        this.logger.warn({ eventsKey: key, id, type, reason: parsed.reason }, 'event not handed to onEvent');
        continue;
      }
      this.call(this.handler, parsed.event);
    }
  }

  private call(handler: EventHandler, event: ChatlaneEvent): void {
    try {
      const done = handler(event);
      if (done && typeof done.then === 'function') {
        done.then(undefined, (err: unknown) => this.failed(event, err));
      }
    } catch (err) {
      this.failed(event, err);
    }
  }

  private failed(event: ChatlaneEvent, err: unknown): void {
    this.logger.error(
      { err, chatKey: event.chatKey, eventId: event.id, type: event.type },
      'onEvent handler failed',
    );
  }
}
