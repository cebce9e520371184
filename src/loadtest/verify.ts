import type { HistoryMessage } from './api.js';
import type { CommitEvent, MessageRecord, SeenOutboxItem } from './chat-state.js';
import type { Delivery } from './webhook.js';

/**
 * The end-of-run checks, as a pure function of what the run collected: every invariant can
 * be shown to fail on a crafted input (test/unit/loadtest-verify.test.ts).
 */

export interface ChatEvidence {
  key: string;
  messages: MessageRecord[];
  /** The chat's messages in order: archived originals (compaction) first, then the history; no summaries. */
  sequence: HistoryMessage[];
  pending: HistoryMessage[];
  outbox: SeenOutboxItem[];
  commits: CommitEvent[];
  firstSentAt: number | undefined;
  /** Replies delivered to the load tool's receiver, by outbox id; undefined when not delivered to us. */
  deliveries?: Map<string, Delivery>;
}

export interface ModelOverlap {
  chatKey: string;
  inFlight: number;
  at: number;
}

export interface InvariantResult {
  name: string;
  description: string;
  ok: boolean;
  /** Skipped: nothing to check it against (e.g. no mock model given). */
  skipped?: boolean;
  violations: number;
  examples: string[];
}

export interface ChatOutcome {
  key: string;
  acked: number;
  answered: number;
  /** First send → the last reply seen, ms. */
  completionMs: number | undefined;
  /** The longest any of its messages waited for its reply, ms. */
  maxWaitMs: number | undefined;
  meanWaitMs: number | undefined;
}

export interface Verification {
  invariants: InvariantResult[];
  /** Send → reply seen, per acknowledged message that got one (ms). */
  e2eMs: number[];
  /** When each of those replies was seen (ms since the run started), same order. */
  answeredAt: number[];
  /** The same, by the message's id (as the load tool named it): when its reply was seen. */
  replySeenAt: Map<string, number>;
  chats: ChatOutcome[];
  messagesWithoutReply: number;
  /** Acknowledged messages by what became of them (the chaos run's table reads these). */
  fate: { lost: number; pendingAtEnd: number; committedTwice: number; outOfOrder: number };
  duplicates: {
    /** Outbox items from turns that never committed: replies sent twice across a crash or takeover. */
    uncommittedReplies: number;
    uncommittedReplyIds: string[];
    /**
     * Acknowledged messages answered by more than one outbox item: the mock model echoes the
     * texts it answers, so an item answers every message whose text it contains. A killed
     * turn's reply repeated by the turn that took over shows up here.
     */
    answeredTwice: number;
    answeredTwiceIds: string[];
    /** Outbox items repeating an earlier item's text in the same chat. */
    repeatedTexts: number;
    repeatedTextIds: string[];
    /** Deliveries of an outbox item beyond its first (same id again: at-least-once). */
    redeliveries: number;
    redeliveredIds: string[];
  };
}

const MAX_EXAMPLES = 10;
const MAX_IDS = 200;
/** Stream ids and Date.now() both have millisecond granularity. */
const OVERLAP_TOLERANCE_MS = 2;

class Check {
  violations = 0;
  examples: string[] = [];
  constructor(
    readonly name: string,
    readonly description: string,
  ) {}

  fail(example: string): void {
    this.violations++;
    if (this.examples.length < MAX_EXAMPLES) this.examples.push(example);
  }

  result(skipped = false): InvariantResult {
    return {
      name: this.name,
      description: this.description,
      ok: skipped || this.violations === 0,
      ...(skipped && { skipped: true }),
      violations: this.violations,
      examples: this.examples,
    };
  }
}

function isAcked(m: MessageRecord): boolean {
  return m.outcome === 'accepted' || m.outcome === 'duplicate';
}

export function verify(chats: ChatEvidence[], modelOverlaps: ModelOverlap[] | undefined): Verification {
  const allAcked = new Check('sends-acknowledged', 'every message sent was acknowledged (after retries)');
  const once = new Check('acked-once', 'every acknowledged message is in its history exactly once');
  const order = new Check(
    'order',
    'acknowledged messages are in history in the order they were acknowledged',
  );
  const answered = new Check(
    'answered',
    "every chat's last message was answered by a committed turn with a reply",
  );
  const pending = new Check('nothing-pending', 'no chat has pending messages left');
  const serialTurns = new Check(
    'turns-serial',
    "no two committed turns of a chat overlapped in time (turn.committed events: Redis time − the turn's duration)",
  );
  const serialModel = new Check(
    'model-serial',
    'the model never saw two requests of one chat at once (mock /stats)',
  );
  const delivered = new Check('delivered', 'every reply in an outbox was delivered to the replyTo receiver');
  const deliveriesExpected = chats.some((c) => c.deliveries !== undefined);
  const redeliveredIds: string[] = [];
  let redeliveries = 0;

  const e2eMs: number[] = [];
  const answeredAt: number[] = [];
  const replySeenAt = new Map<string, number>();
  const outcomes: ChatOutcome[] = [];
  let messagesWithoutReply = 0;
  const uncommittedReplyIds: string[] = [];
  let uncommittedReplies = 0;
  const repeatedTextIds: string[] = [];
  let repeatedTexts = 0;
  const answeredTwiceIds: string[] = [];
  let answeredTwice = 0;
  let ackedTotal = 0;
  const fate = { lost: 0, pendingAtEnd: 0, committedTwice: 0, outOfOrder: 0 };

  for (const chat of chats) {
    const acked = chat.messages.filter(isAcked);
    ackedTotal += acked.length;
    for (const m of chat.messages) {
      if (m.outcome === 'failed')
        allAcked.fail(`${m.id}: ${m.lastError ?? 'failed'} after ${m.attempts} attempt(s)`);
    }

    // Where each of our messages sits in the sequence (user messages only).
    const positions = new Map<string, number[]>();
    chat.sequence.forEach((h, i) => {
      if (h.role !== 'user') return;
      const list = positions.get(h.id);
      if (list) list.push(i);
      else positions.set(h.id, [i]);
    });
    const pendingIds = new Set(chat.pending.map((p) => p.id));
    for (const p of chat.pending) pending.fail(`${chat.key}: ${p.id} still pending`);

    const idOf = (m: MessageRecord) => m.storedId ?? m.id;
    for (const m of chat.messages) {
      const found = positions.get(idOf(m))?.length ?? 0;
      if (found > 1) {
        fate.committedTwice++;
        once.fail(`${m.id}: in history ${found} times`);
      } else if (found === 0 && isAcked(m)) {
        const stillPending = pendingIds.has(idOf(m));
        if (stillPending) fate.pendingAtEnd++;
        else fate.lost++;
        once.fail(
          `${m.id}: ${stillPending ? 'acknowledged, still pending' : 'acknowledged, not in history (lost)'}`,
        );
      }
    }

    let lastPos = -1;
    let lastId = '';
    for (const m of acked) {
      const pos = positions.get(idOf(m))?.[0];
      if (pos === undefined) continue;
      if (pos < lastPos) {
        fate.outOfOrder++;
        order.fail(`${chat.key}: ${m.id} is before ${lastId} in history`);
      }
      lastPos = Math.max(lastPos, pos);
      lastId = m.id;
    }

    // Replies by the turn that committed each message.
    const byRun = new Map<string, SeenOutboxItem[]>();
    for (const item of chat.outbox) {
      const list = byRun.get(item.runId);
      if (list) list.push(item);
      else byRun.set(item.runId, [item]);
    }
    const waits: number[] = [];
    let lastReplyAt: number | undefined;
    let answeredCount = 0;
    for (const m of acked) {
      const pos = positions.get(idOf(m))?.[0];
      if (pos === undefined || m.sentAt === undefined) continue;
      const reply = replyFor(chat.sequence, pos, byRun, chat.deliveries);
      if (!reply) {
        messagesWithoutReply++;
        continue;
      }
      answeredCount++;
      const wait = Math.max(0, reply.seenAt - m.sentAt);
      waits.push(wait);
      e2eMs.push(wait);
      answeredAt.push(reply.seenAt);
      replySeenAt.set(m.id, reply.seenAt);
      lastReplyAt = Math.max(lastReplyAt ?? 0, reply.seenAt);
    }

    const last = acked.at(-1);
    if (last) {
      const pos = positions.get(idOf(last))?.[0];
      if (pos === undefined) answered.fail(`${chat.key}: last message ${last.id} is not in history`);
      else if (!replyFor(chat.sequence, pos, byRun, chat.deliveries)) {
        answered.fail(`${chat.key}: last message ${last.id} has no committed reply`);
      }
    }

    const commits = [...chat.commits].sort((a, b) => a.ts - b.ts);
    for (let i = 1; i < commits.length; i++) {
      const a = commits[i - 1]!;
      const b = commits[i]!;
      if (b.ms === undefined) continue;
      const bStart = b.ts - b.ms;
      if (bStart + OVERLAP_TOLERANCE_MS < a.ts) {
        serialTurns.fail(
          `${chat.key}: turn ${b.runId} started ${a.ts - bStart} ms before turn ${a.runId} committed`,
        );
      }
    }

    const committedRuns = new Set(commits.map((c) => c.runId));
    for (const h of chat.sequence) if (h.metadata?.runId) committedRuns.add(h.metadata.runId);
    const texts = new Set<string>();
    for (const item of chat.outbox) {
      if (chat.deliveries) {
        const d = chat.deliveries.get(item.id);
        if (!d) delivered.fail(`${chat.key}/${item.id}: never delivered`);
        else {
          if (d.count > 1) {
            redeliveries += d.count - 1;
            if (redeliveredIds.length < MAX_IDS) redeliveredIds.push(`${chat.key}/${item.id}×${d.count}`);
          }
        }
      }
      if (!committedRuns.has(item.runId)) {
        uncommittedReplies++;
        if (uncommittedReplyIds.length < MAX_IDS) uncommittedReplyIds.push(`${chat.key}/${item.id}`);
      }
      if (texts.has(item.text)) {
        repeatedTexts++;
        if (repeatedTextIds.length < MAX_IDS) repeatedTextIds.push(`${chat.key}/${item.id}`);
      }
      texts.add(item.text);
    }
    for (const m of acked) {
      if (!m.text || answeredBy(chat.outbox, m.text) < 2) continue;
      answeredTwice++;
      if (answeredTwiceIds.length < MAX_IDS) answeredTwiceIds.push(`${chat.key}/${m.id}`);
    }

    outcomes.push({
      key: chat.key,
      acked: acked.length,
      answered: answeredCount,
      completionMs:
        lastReplyAt !== undefined && chat.firstSentAt !== undefined
          ? lastReplyAt - chat.firstSentAt
          : undefined,
      maxWaitMs: waits.length > 0 ? Math.max(...waits) : undefined,
      meanWaitMs: waits.length > 0 ? waits.reduce((s, v) => s + v, 0) / waits.length : undefined,
    });
  }

  if (ackedTotal === 0) once.fail('no message was acknowledged at all');
  const ours = new Set(chats.map((c) => c.key));
  for (const o of modelOverlaps ?? []) {
    if (ours.has(o.chatKey))
      serialModel.fail(`${o.chatKey}: ${o.inFlight} requests in flight at ${new Date(o.at).toISOString()}`);
  }

  return {
    invariants: [
      allAcked.result(),
      once.result(),
      order.result(),
      answered.result(),
      pending.result(),
      serialTurns.result(),
      serialModel.result(modelOverlaps === undefined),
      delivered.result(!deliveriesExpected),
    ],
    e2eMs,
    answeredAt,
    replySeenAt,
    chats: outcomes,
    messagesWithoutReply,
    fate,
    duplicates: {
      answeredTwice,
      answeredTwiceIds,
      uncommittedReplies,
      uncommittedReplyIds,
      repeatedTexts,
      repeatedTextIds,
      redeliveries,
      redeliveredIds,
    },
  };
}

/**
 * The reply to the user message at `pos`: the turn that committed it is the run of the next
 * assistant message in the sequence; its reply is the first outbox item of that run written
 * after the message was accepted (a merged message is answered by a later step of the same
 * run), else the run's first item.
 */
/** Outbox items whose text quotes this message (how the mock model answers). */
function answeredBy(outbox: SeenOutboxItem[], text: string): number {
  let n = 0;
  for (const item of outbox) if (item.text.includes(text)) n++;
  return n;
}

function replyFor(
  sequence: HistoryMessage[],
  pos: number,
  byRun: Map<string, SeenOutboxItem[]>,
  deliveries: Map<string, Delivery> | undefined,
): SeenOutboxItem | undefined {
  let runId: string | undefined;
  for (let i = pos + 1; i < sequence.length; i++) {
    const h = sequence[i]!;
    if (h.role === 'assistant' && h.metadata?.runId) {
      runId = h.metadata.runId;
      break;
    }
  }
  if (!runId) return undefined;
  const items = byRun.get(runId);
  if (!items || items.length === 0) return undefined;
  const acceptedAt = sequence[pos]!.metadata?.ts ?? 0;
  const after = items.filter((i) => i.ts >= acceptedAt);
  const pool = after.length > 0 ? after : items;
  // Delivered to us: the reply "appears" when it reaches the receiver, not when we polled it.
  const seen = (i: SeenOutboxItem): SeenOutboxItem => {
    const d = deliveries?.get(i.id);
    return d ? { ...i, seenAt: d.at } : i;
  };
  return pool.map(seen).reduce((a, b) => (b.seenAt < a.seenAt ? b : a));
}
