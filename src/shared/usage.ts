import { DAY_MS } from './retention.js';

/**
 * Model usage: what one model call cost in tokens, as the AI SDK reports it, and how a chat's
 * usage is kept in Redis (`P:{c:K}:usage`, a hash written by the fenced scripts through
 * lua/includes/usage.lua). docs/usage-and-cost.md describes the shapes.
 */

/** The token kinds chatlane records, as hash field suffixes and metric labels. */
export const USAGE_KINDS = ['input', 'cached_input', 'cache_write', 'output', 'reasoning'] as const;
export type UsageKind = (typeof USAGE_KINDS)[number];

/**
 * One model call (one tool-loop step or one summary): the model that served it and its
 * tokens. `inputTokens` is the whole input, cached tokens included (the SDK's inputTokens);
 * `outputTokens` includes the reasoning tokens (the SDK's outputTokens).
 */
export interface CallUsage {
  model: string;
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  reasoningTokens: number;
}

/** The part of the AI SDK's LanguageModelUsage chatlane reads (6 and 7 have this shape). */
interface SdkUsage {
  inputTokens: number | undefined;
  outputTokens: number | undefined;
  inputTokenDetails?: { cacheReadTokens?: number | undefined; cacheWriteTokens?: number | undefined };
  outputTokenDetails?: { reasoningTokens?: number | undefined };
}

const n = (v: number | undefined): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0);

/** A call's usage from the SDK's report; a provider that reports nothing counts as zero. */
export function callUsage(model: string, usage: SdkUsage | undefined): CallUsage {
  return {
    model: model || 'unknown',
    inputTokens: n(usage?.inputTokens),
    cachedInputTokens: n(usage?.inputTokenDetails?.cacheReadTokens),
    cacheWriteTokens: n(usage?.inputTokenDetails?.cacheWriteTokens),
    outputTokens: n(usage?.outputTokens),
    reasoningTokens: n(usage?.outputTokenDetails?.reasoningTokens),
  };
}

/** The tokens of each kind of one call, in USAGE_KINDS order. */
export function tokensByKind(call: CallUsage): Record<UsageKind, number> {
  return {
    input: call.inputTokens,
    cached_input: call.cachedInputTokens,
    cache_write: call.cacheWriteTokens,
    output: call.outputTokens,
    reasoning: call.reasoningTokens,
  };
}

/**
 * The calls of one turn (all its attempts) that no script has written yet. The turn's fenced
 * script that settles it (commit, fail, hold or finish) takes them, so each call is written
 * at most once, and not at all when the turn was fenced out.
 */
export class UsageTally {
  private calls: CallUsage[] = [];
  /** Every call added, taken or not: the turn's summary (its log line). */
  readonly total = { calls: 0, inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 };

  add(call: CallUsage): void {
    this.calls.push(call);
    this.total.calls += 1;
    this.total.inputTokens += call.inputTokens;
    this.total.cachedInputTokens += call.cachedInputTokens;
    this.total.outputTokens += call.outputTokens;
  }

  /** The calls so far, emptied: the caller writes them. */
  take(): CallUsage[] {
    const out = this.calls;
    this.calls = [];
    return out;
  }
}

// The last day asked for, [start, start + DAY_MS): every turn asks, nearly always for today.
let lastDay = { start: Number.NaN, day: '' };

/** The UTC day of a time, `YYYY-MM-DD`: the unit usage is summed and budgeted by. */
export function utcDay(ms: number): string {
  if (ms >= lastDay.start && ms < lastDay.start + DAY_MS) return lastDay.day;
  // toISOString throws first on a time that is not one (NaN, ±Infinity).
  const day = new Date(ms).toISOString().slice(0, 10);
  lastDay = { start: Math.floor(ms / DAY_MS) * DAY_MS, day };
  return day;
}

/** The day and the retention a usage write carries (ARGV of the scripts that write usage). */
export interface UsageWrite {
  day: string;
  /** Days before this one are dropped when a day's first usage is written ('' = keep all). */
  keepFrom: string;
  calls: CallUsage[];
}

/** Now's write of `calls`, keeping `keepDays` days (0 = every day). */
export function usageWrite(calls: CallUsage[], keepDays: number, now = Date.now()): UsageWrite {
  return {
    day: utcDay(now),
    keepFrom: keepDays > 0 ? utcDay(now - (keepDays - 1) * DAY_MS) : '',
    calls,
  };
}

/**
 * The calls as the scripts and the events carry them: one entry per call, short keys (an
 * event of a 16-step turn holds 16). `m` model, `i` input, `c` cached input, `w` cache write,
 * `o` output, `r` reasoning.
 */
function callsJson(calls: readonly CallUsage[]): Array<Record<string, string | number>> {
  return calls.map((c) => ({
    m: c.model,
    i: c.inputTokens,
    c: c.cachedInputTokens,
    w: c.cacheWriteTokens,
    o: c.outputTokens,
    r: c.reasoningTokens,
  }));
}

/** The script arguments of a usage write: day, keep-from day, the calls as JSON. */
export function usageArgs(write: UsageWrite | undefined): [string, string, string] {
  if (!write || write.calls.length === 0) return ['', '', '[]'];
  return [write.day, write.keepFrom, JSON.stringify(callsJson(write.calls))];
}

/** One parsed field of the usage hash. */
type UsageField =
  | { day: string; model: string; kind: UsageKind | 'calls'; value: number }
  | { day: string; model: undefined; kind: 'total' | 'notice'; value: number };

const KINDS = new Set<string>([...USAGE_KINDS, 'calls']);

/**
 * `<day>|<model>|<kind>` (the model may hold `|`: the day is the first part, the kind the
 * last), or `<day>|total` / `<day>|notice`. undefined for anything else.
 */
export function parseUsageField(field: string, value: string): UsageField | undefined {
  const first = field.indexOf('|');
  if (first !== 10) return undefined;
  const day = field.slice(0, 10);
  const rest = field.slice(11);
  const v = Number(value);
  if (!Number.isFinite(v)) return undefined;
  // The day's own fields (includes/usage.lua, budget-hold.lua): the budget's total, the notice flag.
  if (rest === 'total' || rest === 'notice') return { day, model: undefined, kind: rest, value: v };
  const last = rest.lastIndexOf('|');
  if (last <= 0) return undefined;
  const kind = rest.slice(last + 1);
  if (!KINDS.has(kind)) return undefined;
  return { day, model: rest.slice(0, last), kind: kind as UsageKind | 'calls', value: v };
}
