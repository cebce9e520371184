import type { PriceTable } from '../prices.js';
import { parseUsageField, type UsageKind } from '../usage.js';
import type { ChatStore } from './chat-store.js';

/**
 * A chat's usage as GET /v1/chats/:chatKey/usage shows it: summed by model and by day from the
 * chat's usage hash (written by the fenced scripts, see src/shared/usage.ts).
 */

export interface TokenSums {
  calls: number;
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  reasoningTokens: number;
}

export interface UsageSums extends TokenSums {
  /** USD, with a price file: the priced models' cost (see `unpriced`). */
  cost?: number;
}

export interface ChatUsage {
  chatKey: string;
  from: string | null;
  to: string | null;
  total: UsageSums & { unpriced?: string[] };
  /** `cost` is null for a model the price file does not list. */
  byModel: Array<TokenSums & { model: string; cost?: number | null }>;
  byDay: Array<
    UsageSums & { day: string; budgetTokens: number; models: Array<UsageSums & { model: string }> }
  >;
}

const FIELD_OF: Record<UsageKind | 'calls', keyof TokenSums> = {
  calls: 'calls',
  input: 'inputTokens',
  cached_input: 'cachedInputTokens',
  cache_write: 'cacheWriteTokens',
  output: 'outputTokens',
  reasoning: 'reasoningTokens',
};

const zero = (): UsageSums => ({
  calls: 0,
  inputTokens: 0,
  cachedInputTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
});

function tokensOf(s: TokenSums): Record<UsageKind, number> {
  return {
    input: s.inputTokens,
    cached_input: s.cachedInputTokens,
    cache_write: s.cacheWriteTokens,
    output: s.outputTokens,
    reasoning: s.reasoningTokens,
  };
}

function addInto(into: TokenSums, from: TokenSums): void {
  for (const key of Object.values(FIELD_OF)) into[key] += from[key];
}

/** The sums of one chat between two UTC days (inclusive; either may be open). */
export async function readChatUsage(
  store: ChatStore,
  chatKey: string,
  range: { from?: string | undefined; to?: string | undefined },
  prices?: PriceTable,
): Promise<ChatUsage> {
  const hash = await store.redis.hgetall(store.keys(chatKey).usage);
  const days = new Map<string, { models: Map<string, UsageSums>; budgetTokens: number }>();
  for (const [field, value] of Object.entries(hash)) {
    const f = parseUsageField(field, value);
    if (!f) continue;
    if ((range.from && f.day < range.from) || (range.to && f.day > range.to)) continue;
    let day = days.get(f.day);
    if (!day) {
      day = { models: new Map(), budgetTokens: 0 };
      days.set(f.day, day);
    }
    if (f.model === undefined) {
      if (f.kind === 'total') day.budgetTokens = f.value;
      continue;
    }
    let sums = day.models.get(f.model);
    if (!sums) {
      sums = zero();
      day.models.set(f.model, sums);
    }
    sums[FIELD_OF[f.kind]] += f.value;
  }

  const costOf = (model: string, s: TokenSums) => prices?.costOf(model, tokensOf(s));
  const total: ChatUsage['total'] = zero();
  const byModel = new Map<string, TokenSums>();
  const byDay: ChatUsage['byDay'] = [];
  for (const day of [...days.keys()].sort()) {
    const { models, budgetTokens } = days.get(day)!;
    const daySums: UsageSums = zero();
    const dayModels: Array<UsageSums & { model: string }> = [];
    for (const model of [...models.keys()].sort()) {
      const sums = models.get(model)!;
      addInto(daySums, sums);
      let m = byModel.get(model);
      if (!m) {
        m = zero();
        byModel.set(model, m);
      }
      addInto(m, sums);
      const cost = costOf(model, sums);
      dayModels.push({ model, ...sums, ...(prices && cost !== undefined && { cost }) });
    }
    if (prices) daySums.cost = dayModels.reduce((usd, m) => usd + (m.cost ?? 0), 0);
    byDay.push({ day, ...daySums, budgetTokens, models: dayModels });
  }
  const models = [...byModel.keys()].sort();
  const unpriced: string[] = [];
  const byModelOut: ChatUsage['byModel'] = models.map((model) => {
    const sums = byModel.get(model)!;
    addInto(total, sums);
    if (!prices) return { model, ...sums };
    const cost = costOf(model, sums);
    if (cost === undefined) unpriced.push(model);
    return { model, ...sums, cost: cost ?? null };
  });
  if (prices) {
    total.cost = byModelOut.reduce((usd, m) => usd + (m.cost ?? 0), 0);
    total.unpriced = unpriced;
  }
  return { chatKey, from: range.from ?? null, to: range.to ?? null, total, byModel: byModelOut, byDay };
}
