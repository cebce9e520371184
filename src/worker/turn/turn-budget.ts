import { DEFAULT_BUDGET_NOTICE } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { checkBudget } from '../../shared/store/budget.js';
import type { ChatStore, InboxEntry } from '../../shared/store/chat-store.js';
import type { TurnMessages } from '../agent/earlier-sends.js';
import { type DeliveryTrigger, triggerDelivery } from '../agent/tools/outbox.js';
import type { Lane } from './lane.js';

/** CHAT_DAILY_TOKEN_BUDGET and its notice (the day is the store's clock's UTC day). */
export interface TurnBudget {
  dailyTokens: number;
  notice?: string;
}

export interface BudgetDeps {
  store: ChatStore;
  budget?: TurnBudget;
  deliver?: DeliveryTrigger;
}

/** A turn whose chat was over its daily budget: its messages went into history, no model call. */
export type HeldTurn = { status: 'held'; runId: string; held: number; noticed: boolean; pending: number };

/**
 * Before any model call: a chat over today's budget gets its messages kept in history (the
 * model reads them on the chat's next turn, the next day) and, once a day, the notice. Returns
 * the outcome then, undefined when the turn may call the model, `lost` when fenced out.
 */
export async function holdIfOverBudget(
  deps: BudgetDeps,
  lane: Lane,
  logger: Logger,
  pending: InboxEntry[],
  turn: TurnMessages,
): Promise<HeldTurn | { status: 'lost'; runId: string } | undefined> {
  const { budget } = deps;
  if (!budget || budget.dailyTokens <= 0) return undefined;
  const { chatKey, runId, fence } = lane;
  const res = await checkBudget(deps.store, chatKey, fence, {
    runId,
    consumed: pending.map((e) => e.streamId),
    messages: turn.messages,
    notice: budget.notice ?? DEFAULT_BUDGET_NOTICE,
    dailyTokens: budget.dailyTokens,
  });
  if (!res.ok) {
    lane.markLost(`budget-hold ${res.reason}`);
    return { status: 'lost', runId };
  }
  if (res.status === 'under') return undefined;
  logger.info(
    { used: res.used, budget: budget.dailyTokens, held: pending.length, noticed: res.noticeId !== undefined },
    'chat over its daily token budget; messages kept, no model call',
  );
  if (res.routed) await triggerDelivery({ deliver: deps.deliver, logger }, chatKey);
  return { status: 'held', runId, held: pending.length, noticed: res.noticeId !== undefined, pending: 0 };
}
