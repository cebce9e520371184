/**
 * Counters, recordings and test controls of the mock model server. Everything a test
 * asserts on lives here, so the same object serves in-process callers and `GET /stats`.
 */

import { ChunkGates } from './chunk-gates.js';
import { MockPromptCache } from './prompt-cache.js';

export const NO_CHAT_KEY = '(none)';

export const DEFAULT_FAIL_MESSAGE =
  "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.";
export const DEFAULT_FAIL_CODE = 'context_length_exceeded';

export interface RecordedRequest {
  chatKey: string;
  /** The wire protocol it came in (chat-completions, responses, anthropic-messages, gemini). */
  protocol: string;
  /** The model it named. */
  model: string;
  at: number;
  stream: boolean;
  /** The request's `messages`, exactly as received. */
  messages: unknown[];
  /** Names of the function tools offered. */
  tools: string[];
  promptTokens: number;
  /** Of `promptTokens`, those the chat's previous request had as a prefix (prompt-cache.ts). */
  cachedTokens: number;
  /** The request body as received (tool definitions, provider fields, ...). */
  body: unknown;
}

export interface Violation {
  chatKey: string;
  inFlight: number;
  at: number;
}

export interface MockLlmStats {
  requests: number;
  inFlight: number;
  maxInFlightPerChat: number;
  violations: Violation[];
  perChat: Record<string, number>;
}

export interface FailNextInput {
  /** Only requests of this chat match; omitted, any request does. */
  chatKey?: string;
  /** Only requests whose messages contain this text match (a message the model always refuses). */
  contains?: string;
  /** Only requests naming this model match (an outage of one model, for fallback). */
  model?: string;
  count: number;
  status?: number;
  message?: string;
  code?: string;
  /** Sent as `retry-after-ms` (a rate limit saying when to come back; clients' retries honour it). */
  retryAfterMs?: number;
  /**
   * A streamed request fails after its stream opened (200), before any content: `error` sends
   * the protocol's in-stream error event, `drop` cuts the connection. Others fail as usual.
   */
  midStream?: MidStream;
}

export type MidStream = 'error' | 'drop';

export interface Failure {
  status: number;
  message: string;
  code: string;
  retryAfterMs?: number;
  midStream?: MidStream;
}

interface FailRule extends Failure {
  chatKey: string | undefined;
  contains: string | undefined;
  model: string | undefined;
  remaining: number;
}

interface Gate {
  promise: Promise<void>;
  open: () => void;
}

interface ArrivalWaiter {
  chatKey: string;
  n: number;
  resolve: () => void;
}

export type LatencyRange = [number, number];

/** A fixed latency for every chat's `from`-th request and later (counted since the last reset). */
export interface LaterRequestLatency {
  from: number;
  ms: number;
}

function checkLatency(range: LatencyRange): LatencyRange {
  const [min, max] = range;
  if (!Number.isFinite(min) || !Number.isFinite(max) || min < 0 || min > max) {
    throw new RangeError(`latency must be [min, max] with 0 <= min <= max, got [${min}, ${max}]`);
  }
  return [min, max];
}

/** Violations are few in a healthy run; the cap only guards a badly broken one. */
const MAX_VIOLATIONS = 10_000;

/**
 * A request whose client went away at most this long after another request of its chat
 * arrived does not count as overlapping that one: its client had given it up first. A client
 * that aborts a call and at once sends the next (LANE_POLICY=interrupt restarts the step)
 * closes the first connection before the second request leaves, but this server may handle
 * the second's arrival before the first's close, within the same turn of its event loop.
 */
export const ABANDONED_OVERLAP_MS = 100;

/** One request in flight: the violations recorded while it was, which it is part of. */
interface LiveRequest {
  overlaps: Violation[];
}

/** Resolves after `ms`, or early when `signal` aborts: a gone client should not pin a timer. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  return untilOrAbort(
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
    signal,
  ).finally(() => clearTimeout(timer));
}

function untilOrAbort(promise: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.resolve();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([promise, aborted]).finally(() => {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  });
}

export class MockLlmState {
  private readonly initialLatency: LatencyRange;
  private readonly maxRecorded: number;

  private requestCount = 0;
  private maxPerChat = 0;
  private violationList: Violation[] = [];
  private arrivals = new Map<string, number>();
  private recordings: RecordedRequest[] = [];
  /** Per chat, when each streamed answer with content wrote its first content event. */
  private firstContent = new Map<string, number[]>();

  // In-flight counts describe live requests, not history, so `reset()` leaves them alone.
  private inFlightTotal = 0;
  private readonly inFlightByChat = new Map<string, number>();
  private readonly liveByChat = new Map<string, Set<LiveRequest>>();

  private latency: LatencyRange;
  /** Pause between the chunks of a streamed answer (0: all at once); kept by `reset()`. */
  chunkMs = 0;
  private chatLatency = new Map<string, number>();
  private laterLatency: LaterRequestLatency | undefined;
  private failRules: FailRule[] = [];
  private gates = new Map<string, Gate>();
  private waiters: ArrivalWaiter[] = [];
  /** What each chat sent last: the cached tokens of its next request. */
  readonly promptCache = new MockPromptCache();
  /** Streams that stop after each content event until a test lets the next one out. */
  readonly chunkGates = new ChunkGates();

  constructor(options: { latencyMs?: LatencyRange; maxRecorded?: number } = {}) {
    this.initialLatency = checkLatency(options.latencyMs ?? [0, 0]);
    this.latency = this.initialLatency;
    this.maxRecorded = Math.max(0, options.maxRecorded ?? 10_000);
  }

  get requests(): number {
    return this.requestCount;
  }

  get inFlight(): number {
    return this.inFlightTotal;
  }

  get maxInFlightPerChat(): number {
    return this.maxPerChat;
  }

  get violations(): Violation[] {
    return [...this.violationList];
  }

  get perChat(): Record<string, number> {
    return Object.fromEntries(this.arrivals);
  }

  /**
   * With `chatKeyPrefix`, every figure covers only the chats whose key starts with it (a
   * load test's own chats on a mock that others use too); `maxInFlightPerChat` then comes
   * from the violations, so it is exact whenever it is above 1.
   */
  stats(chatKeyPrefix?: string): MockLlmStats {
    if (chatKeyPrefix === undefined) {
      return {
        requests: this.requests,
        inFlight: this.inFlight,
        maxInFlightPerChat: this.maxInFlightPerChat,
        violations: this.violations,
        perChat: this.perChat,
      };
    }
    const ours = (chatKey: string) => chatKey.startsWith(chatKeyPrefix);
    const perChat = Object.fromEntries([...this.arrivals].filter(([k]) => ours(k)));
    const violations = this.violationList.filter((v) => ours(v.chatKey));
    const requests = Object.values(perChat).reduce((a, b) => a + b, 0);
    let inFlight = 0;
    for (const [k, n] of this.inFlightByChat) if (ours(k)) inFlight += n;
    return {
      requests,
      inFlight,
      maxInFlightPerChat: Math.max(requests > 0 ? 1 : 0, ...violations.map((v) => v.inFlight)),
      violations,
      perChat,
    };
  }

  /** Recorded requests, oldest first; only those of `chatKey` when given. */
  recorded(chatKey?: string): RecordedRequest[] {
    return chatKey === undefined
      ? [...this.recordings]
      : this.recordings.filter((r) => r.chatKey === chatKey);
  }

  /** A streamed answer of `chatKey` wrote its first content event at `at` (epoch ms, sub-ms). */
  recordFirstContent(chatKey: string, at: number): void {
    const list = this.firstContent.get(chatKey);
    if (list) list.push(at);
    else this.firstContent.set(chatKey, [at]);
  }

  /**
   * For each chat under `chatKeyPrefix`: when its streamed answers with content wrote their
   * first content event (the model's first token), in order; the clock is
   * `performance.timeOrigin + performance.now()`, comparable across processes of one host.
   */
  firstContentAt(chatKeyPrefix: string): Record<string, number[]> {
    return Object.fromEntries([...this.firstContent].filter(([k]) => k.startsWith(chatKeyPrefix)));
  }

  setLatency(range: LatencyRange): void {
    this.latency = checkLatency(range);
  }

  /** A fixed latency for one chat, replacing the global range; `undefined` removes it. */
  setChatLatency(chatKey: string, ms: number | undefined): void {
    if (ms === undefined) {
      this.chatLatency.delete(chatKey);
      return;
    }
    checkLatency([ms, ms]);
    this.chatLatency.set(chatKey, ms);
  }

  /**
   * Every chat's `from`-th request and later wait `ms` instead of the global range (a chat's
   * own latency still wins): with `from` 2, a turn's first model call is answered as usual
   * and its second parks, which a benchmark cannot get from per-chat latencies without
   * knowing every chat key; `undefined` removes it.
   */
  setLaterRequestLatency(later: LaterRequestLatency | undefined): void {
    if (later !== undefined) {
      if (!Number.isInteger(later.from) || later.from < 1) {
        throw new RangeError(`from must be a positive integer, got ${later.from}`);
      }
      checkLatency([later.ms, later.ms]);
    }
    this.laterLatency = later;
  }

  failNext(input: FailNextInput): void {
    if (!Number.isInteger(input.count) || input.count < 0) {
      throw new RangeError(`failNext count must be a non-negative integer, got ${input.count}`);
    }
    if (input.count === 0) return;
    this.failRules.push({
      chatKey: input.chatKey,
      contains: input.contains,
      model: input.model,
      remaining: input.count,
      status: input.status ?? 400,
      message: input.message ?? DEFAULT_FAIL_MESSAGE,
      code: input.code ?? DEFAULT_FAIL_CODE,
      ...(input.retryAfterMs !== undefined && { retryAfterMs: input.retryAfterMs }),
      ...(input.midStream && { midStream: input.midStream }),
    });
  }

  /** Requests of `chatKey` that arrive from now on wait until `release(chatKey)`. */
  hold(chatKey: string): void {
    if (this.gates.has(chatKey)) return;
    let open!: () => void;
    const promise = new Promise<void>((resolve) => {
      open = resolve;
    });
    this.gates.set(chatKey, { promise, open });
  }

  release(chatKey: string): void {
    const gate = this.gates.get(chatKey);
    if (!gate) return;
    this.gates.delete(chatKey);
    gate.open();
  }

  /** Held requests and held streams alike. */
  releaseAll(): void {
    for (const chatKey of [...this.gates.keys()]) this.release(chatKey);
    this.chunkGates.releaseAll();
  }

  /** Resolves once `n` requests of `chatKey` have arrived (since the last reset). */
  waitForRequest(chatKey: string, n = 1): Promise<void> {
    if ((this.arrivals.get(chatKey) ?? 0) >= n) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push({ chatKey, n, resolve });
    });
  }

  /**
   * Stats, recordings and controls back to a fresh start. Held requests and streams are let
   * go so nothing stays stuck behind a gate nobody remembers; pending `waitForRequest` calls
   * keep waiting and count arrivals from zero.
   */
  reset(): void {
    this.promptCache.clear();
    this.requestCount = 0;
    this.maxPerChat = 0;
    this.violationList = [];
    // Live requests stay live; the overlaps they remember belong to the list just dropped.
    for (const live of this.liveByChat.values()) for (const r of live) r.overlaps = [];
    this.arrivals = new Map();
    this.recordings = [];
    this.firstContent = new Map();
    this.latency = this.initialLatency;
    this.chatLatency = new Map();
    this.laterLatency = undefined;
    this.failRules = [];
    this.releaseAll();
  }

  /**
   * Accounts for a request the moment it arrives and returns its `end` function, which
   * must run exactly once when the response is done or the client went away (it is
   * idempotent, so callers may call it from several places; `clientGone` when the client
   * closed the request before its response was done). Also decides now whether the request
   * fails, so "the next N requests" means the next N to arrive.
   */
  begin(entry: RecordedRequest): {
    end: (clientGone?: boolean) => void;
    failure: Failure | undefined;
    index: number;
  } {
    const { chatKey } = entry;
    this.requestCount += 1;
    const arrived = (this.arrivals.get(chatKey) ?? 0) + 1;
    this.arrivals.set(chatKey, arrived);

    this.inFlightTotal += 1;
    const live = (this.inFlightByChat.get(chatKey) ?? 0) + 1;
    this.inFlightByChat.set(chatKey, live);
    if (live > this.maxPerChat) this.maxPerChat = live;
    const others = this.liveByChat.get(chatKey) ?? new Set<LiveRequest>();
    this.liveByChat.set(chatKey, others);
    if (live > 1) {
      const violation = { chatKey, inFlight: live, at: entry.at };
      this.pushBounded(this.violationList, violation, MAX_VIOLATIONS);
      for (const other of others) other.overlaps.push(violation);
    }
    const request: LiveRequest = { overlaps: [] };
    others.add(request);

    this.pushBounded(this.recordings, entry, this.maxRecorded);
    const failure = this.takeFailure(entry);
    this.notifyWaiters(chatKey, arrived);

    let ended = false;
    const end = (clientGone = false) => {
      if (ended) return;
      ended = true;
      this.inFlightTotal -= 1;
      const left = (this.inFlightByChat.get(chatKey) ?? 1) - 1;
      if (left > 0) this.inFlightByChat.set(chatKey, left);
      else this.inFlightByChat.delete(chatKey);
      others.delete(request);
      if (others.size === 0 && this.liveByChat.get(chatKey) === others) this.liveByChat.delete(chatKey);
      if (clientGone) this.abandoned(request, Date.now());
    };
    return { end, failure, index: arrived };
  }

  /** `request`'s client left at `at`: overlaps that began just before it are not counted (ABANDONED_OVERLAP_MS). */
  private abandoned(request: LiveRequest, at: number): void {
    let dropped = false;
    for (const violation of request.overlaps) {
      if (at - violation.at > ABANDONED_OVERLAP_MS) continue;
      violation.inFlight -= 1;
      if (violation.inFlight > 1) continue;
      const i = this.violationList.indexOf(violation);
      if (i >= 0) this.violationList.splice(i, 1);
      dropped = true;
    }
    if (dropped) {
      this.maxPerChat = Math.max(this.requestCount > 0 ? 1 : 0, ...this.violationList.map((v) => v.inFlight));
    }
  }

  /**
   * The hold gate first, then the latency, so a released request still pays its latency.
   * `index` is the request's place among its chat's (`begin`'s).
   */
  async delay(chatKey: string, signal: AbortSignal | undefined, index: number): Promise<void> {
    const gate = this.gates.get(chatKey);
    if (gate) await untilOrAbort(gate.promise, signal);
    if (signal?.aborted) return;
    await sleep(this.pickLatency(chatKey, index), signal);
  }

  private pickLatency(chatKey: string, index: number): number {
    const fixed = this.chatLatency.get(chatKey);
    if (fixed !== undefined) return fixed;
    if (this.laterLatency && index >= this.laterLatency.from) return this.laterLatency.ms;
    const [min, max] = this.latency;
    return min + Math.random() * (max - min);
  }

  private takeFailure({ chatKey, model, messages }: RecordedRequest): Failure | undefined {
    let text: string | undefined;
    const index = this.failRules.findIndex((r) => {
      if (r.chatKey !== undefined && r.chatKey !== chatKey) return false;
      if (r.model !== undefined && r.model !== model) return false;
      if (r.contains === undefined) return true;
      text ??= JSON.stringify(messages);
      return text.includes(r.contains);
    });
    const rule = this.failRules[index];
    if (!rule) return undefined;
    rule.remaining -= 1;
    if (rule.remaining <= 0) this.failRules.splice(index, 1);
    const { chatKey: _c, contains: _t, model: _m, remaining: _r, ...failure } = rule;
    return failure;
  }

  private notifyWaiters(chatKey: string, arrived: number): void {
    if (this.waiters.length === 0) return;
    this.waiters = this.waiters.filter((w) => {
      if (w.chatKey !== chatKey || arrived < w.n) return true;
      w.resolve();
      return false;
    });
  }

  // Bounded so a long benchmark against the mock cannot grow it without limit.
  private pushBounded<T>(list: T[], item: T, cap: number): void {
    if (cap === 0) return;
    list.push(item);
    if (list.length > cap) list.splice(0, list.length - cap);
  }
}
