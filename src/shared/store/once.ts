import { z } from 'zod';
import type { ChatStore } from './chat-store.js';
import { scripts } from './scripts.js';

/**
 * The store side of a tool's `context.once(key, fn)`: records in the chat's slot, written by
 * once.lua under the turn's fence (docs/design.md §4, "once"). The caller is
 * worker/agent/tools/once.ts.
 */

export interface OnceLimits {
  /** ONCE_RESULT_MAX_BYTES: the largest result (JSON, UTF-8 bytes) that is stored. */
  maxBytes: number;
  /** ONCE_MAX_KEYS: keys per chat; past it the key written longest ago is dropped. */
  maxKeys: number;
  /** ONCE_KEEP_MS: how long a record is kept after its last write. */
  keepMs: number;
}

export const DEFAULT_ONCE_LIMITS: OnceLimits = {
  maxBytes: 8192,
  maxKeys: 200,
  keepMs: 7 * 24 * 3600 * 1000,
};

/** The longest key (characters) a call may name: keys are hash fields, not free text. */
export const ONCE_KEY_MAX_CHARS = 256;

const recordSchema = z.object({
  s: z.enum(['run', 'done']),
  n: z.number().int().positive(),
  f: z.string(),
  r: z.string(),
  t: z.number(),
  v: z.string().optional(),
  e: z.string().optional(),
});

/** A key's stored result: fn ran (attempt `attempt`); `json` its value, or `refused` why it is not kept. */
export interface OnceResult {
  attempt: number;
  runId: string;
  /** The result's JSON text; undefined when fn returned no value or it was not kept. */
  json: string | undefined;
  refused: string | undefined;
}

export type OnceBegin =
  | { status: 'done'; result: OnceResult }
  | { status: 'run'; attempt: number }
  | { status: 'fenced-out' };

export type OnceEnd = { status: 'stored' | 'done'; result: OnceResult } | { status: 'fenced-out' };

function resultOf(raw: unknown): OnceResult {
  const record = recordSchema.parse(JSON.parse(String(raw)));
  if (record.s !== 'done') throw new Error(`once record is ${record.s}, expected done`);
  return { attempt: record.n, runId: record.r, json: record.v, refused: record.e };
}

interface OnceCall {
  fence: string;
  runId: string;
  key: string;
}

function run(
  store: ChatStore,
  chatKey: string,
  op: 'begin' | 'end',
  call: OnceCall,
  limits: OnceLimits,
  end: [json: string, refused: string] = ['', ''],
): Promise<[string, unknown]> {
  const k = store.keys(chatKey);
  return scripts.once.run(
    store.redis,
    [k.meta, k.once, k.onceAt, k.events],
    [op, call.fence, store.maxEvents, call.runId, call.key, limits.keepMs, limits.maxKeys, ...end],
    store.events,
  ) as Promise<[string, unknown]>;
}

/** A key's record as it is now: fn is running or died running (`run`), or its result is stored (`done`). */
export type OnceState = { status: 'run'; attempt: number } | { status: 'done'; result: OnceResult };

/** The records of `keys` (absent keys and unreadable records are left out); a plain read, no fence. */
export async function readOnce(
  store: ChatStore,
  chatKey: string,
  keys: readonly string[],
): Promise<Map<string, OnceState>> {
  const out = new Map<string, OnceState>();
  if (keys.length === 0) return out;
  const raw = await store.redis.hmget(store.keys(chatKey).once, ...keys);
  keys.forEach((key, i) => {
    const parsed = recordSchema.safeParse(safeJson(raw[i]));
    if (!parsed.success) return;
    const r = parsed.data;
    out.set(
      key,
      r.s === 'run'
        ? { status: 'run', attempt: r.n }
        : { status: 'done', result: { attempt: r.n, runId: r.r, json: r.v, refused: r.e } },
    );
  });
  return out;
}

function safeJson(raw: string | null | undefined): unknown {
  if (!raw) return undefined;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return undefined;
  }
}

/** Before fn: the stored result if there is one (fn must not run), else the attempt fn runs as. */
export async function beginOnce(
  store: ChatStore,
  chatKey: string,
  call: OnceCall,
  limits: OnceLimits,
): Promise<OnceBegin> {
  const [status, value] = await run(store, chatKey, 'begin', call, limits);
  if (status === 'done') return { status, result: resultOf(value) };
  if (status === 'run') return { status, attempt: z.number().int().positive().parse(value) };
  if (status === 'fenced-out') return { status };
  throw new Error(`once.lua answered ${status}`);
}

/**
 * After fn: store its result (`json`, undefined for no value) or, when it cannot be kept, why
 * (`refused`). An earlier stored result stands (`done`). Fenced out: nothing written.
 */
export async function endOnce(
  store: ChatStore,
  chatKey: string,
  call: OnceCall & { json: string | undefined; refused: string | undefined },
  limits: OnceLimits,
): Promise<OnceEnd> {
  const [status, value] = await run(store, chatKey, 'end', call, limits, [
    call.json ?? '',
    call.refused ?? '',
  ]);
  if (status === 'stored' || status === 'done') return { status, result: resultOf(value) };
  if (status === 'fenced-out') return { status };
  throw new Error(`once.lua answered ${status}`);
}
