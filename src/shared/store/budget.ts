import type { ChatMessage } from '../messages.js';
import { storedJson } from '../storable.js';
import { utcDay } from '../usage.js';
import { type ChatStore, type FencedResult, fencedRefusal, tokensOf, tuple } from './chat-store.js';
import { scripts } from './scripts.js';

/** A turn's messages, checked against the chat's daily budget before any model call. */
export interface BudgetCheck {
  runId: string;
  /** Inbox stream ids the turn would consume. */
  consumed: string[];
  /** What the turn answers, in history order (earlier runs' sends in place). */
  messages: ChatMessage[];
  notice: string;
  /** Tokens per UTC day. */
  dailyTokens: number;
}

export type BudgetResult =
  | { status: 'under'; used: number }
  | { status: 'held'; used: number; noticeId: string | undefined; routed: boolean };

/**
 * budget-hold.lua: under the chat's budget for today nothing is written; over it the
 * messages go into history, the day's one notice into the outbox, atomically.
 */
export async function checkBudget(
  store: ChatStore,
  chatKey: string,
  fence: string,
  check: BudgetCheck,
): Promise<FencedResult<BudgetResult>> {
  const k = store.keys(chatKey);
  const now = store.now();
  const raw = tuple.parse(
    await scripts.budgetHold.run(
      store.redis,
      [k.meta, k.hist, k.inbox, k.events, k.outbox, k.uncommitted, k.usage],
      [
        fence,
        store.maxEvents,
        store.retention.outboxKeep,
        check.runId,
        check.notice,
        now,
        utcDay(now),
        check.dailyTokens,
        tokensOf(check.messages),
        check.consumed.length,
        ...check.consumed,
        ...check.messages.map((m) => storedJson(m, { tooDeep: 'clip' })),
      ],
      store.events,
    ),
  );
  if (raw[0] === 'under') return { ok: true, status: 'under', used: Number(raw[1]) };
  if (raw[0] === 'held') {
    const id = String(raw[1]);
    return {
      ok: true,
      status: 'held',
      noticeId: id || undefined,
      routed: Number(raw[2]) === 1,
      used: Number(raw[3]),
    };
  }
  return fencedRefusal(raw);
}
