import { z } from 'zod';

/**
 * What may be stored: JSON that every later stage can read back. Redis's Lua scripts decode
 * stored messages with cjson, which refuses more than 1000 levels of nesting and any `\u`
 * escape of a lone UTF-16 surrogate ("invalid unicode escape code") — and JSON.stringify
 * writes a lone surrogate exactly so. A message that cjson cannot decode makes its chat's
 * compaction fail forever. So every value written for a script passes through here:
 *
 * - strings (object keys too) are made well-formed: a lone surrogate becomes U+FFFD, the
 *   replacement character (no UTF-8 system can carry it anyway); all else is kept as sent;
 * - nesting is bounded by STORED_MAX_DEPTH, far below cjson's limit, so that a stored
 *   message still decodes inside the archive entry or snapshot that wraps it.
 *
 * Ingest refuses a deeper message (400); output the worker produces itself (a model's tool
 * input) has its too-deep subtrees replaced by a marker instead, so a turn never fails on it.
 */

/** Deepest nesting of a stored value (message, archive entry, event): well under cjson's 1000. */
export const STORED_MAX_DEPTH = 64;

/** Deepest nesting of a JSON request body; checked on the raw text before parsing. */
export const BODY_MAX_DEPTH = 64;

/** `metadata.extra` of an ingested message: caller data we carry but do not interpret. */
export const EXTRA_MAX_DEPTH = 8;
export const EXTRA_MAX_BYTES = 16 * 1024;

export const TOO_DEEP_MARKER = '[nested too deep]';

/** A value chatlane refuses to store: the caller answers 400. */
export class UnstorableError extends Error {
  override name = 'UnstorableError';
}

/** Depth of a parsed value: a scalar is 0, `{}` or `[]` is 1. Stops counting past `limit`. */
export function valueDepth(value: unknown, limit = Number.POSITIVE_INFINITY): number {
  let max = 0;
  // Iterative: the point is to measure values too deep for recursion.
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    const depth = d + 1;
    if (depth > max) max = depth;
    if (max > limit) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth]);
  }
  return max;
}

/** Nesting depth of raw JSON text, in one linear pass that never recurses. */
export function jsonTextDepth(text: string, limit = Number.POSITIVE_INFINITY): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

const wellFormed = (s: string) => (s.isWellFormed() ? s : s.toWellFormed());

/**
 * `value` as cjson can decode it: well-formed strings, at most `maxDepth` levels. Deeper
 * subtrees throw UnstorableError (`tooDeep: 'throw'`) or become TOO_DEEP_MARKER. Values that
 * JSON drops or turns into null (undefined, functions, NaN) are left for JSON.stringify to
 * treat as it always does. Only what had to change is copied: nearly every value is already
 * storable and comes back as the same object, which spares a deep copy of every message a
 * turn commits (garbage the worker's GC paid for at thousands of turns in flight).
 */
export function storable(
  value: unknown,
  opts: { maxDepth?: number; tooDeep?: 'throw' | 'clip' } = {},
): unknown {
  const maxDepth = opts.maxDepth ?? STORED_MAX_DEPTH;
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') return wellFormed(v);
    if (v === null || typeof v !== 'object') return v;
    if (depth >= maxDepth) {
      if (opts.tooDeep === 'clip') return TOO_DEEP_MARKER;
      throw new UnstorableError(`nested deeper than ${maxDepth} levels`);
    }
    // toJSON first (Date and friends), as JSON.stringify would.
    const json = (v as { toJSON?: () => unknown }).toJSON;
    if (typeof json === 'function') return walk(json.call(v), depth);
    if (Array.isArray(v)) {
      let out: unknown[] | undefined;
      for (let i = 0; i < v.length; i++) {
        const item: unknown = v[i];
        const fixed = walk(item, depth + 1);
        if (out) out.push(fixed);
        else if (!Object.is(fixed, item)) {
          out = v.slice(0, i);
          out.push(fixed);
        }
      }
      return out ?? v;
    }
    const record = v as Record<string, unknown>;
    const keys = Object.keys(record);
    let out: Record<string, unknown> | undefined;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const item = record[key];
      const fixed = walk(item, depth + 1);
      const fixedKey = wellFormed(key);
      if (!out && (fixedKey !== key || !Object.is(fixed, item))) {
        out = {};
        for (let j = 0; j < i; j++) out[keys[j]!] = record[keys[j]!];
      }
      if (out) out[fixedKey] = fixed;
    }
    return out ?? v;
  };
  return walk(value, 0);
}

/** JSON.stringify(storable(value)): the one way a value is serialised for Redis. */
export function storedJson(value: unknown, opts?: { maxDepth?: number; tooDeep?: 'throw' | 'clip' }): string {
  return JSON.stringify(storable(value, opts));
}

/** `metadata.extra` as ingest accepts it: an object of bounded depth and size. */
export const extraSchema = z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
  if (valueDepth(value, EXTRA_MAX_DEPTH) > EXTRA_MAX_DEPTH) {
    ctx.addIssue({ code: 'custom', message: `nested deeper than ${EXTRA_MAX_DEPTH} levels` });
  } else if (Buffer.byteLength(JSON.stringify(value), 'utf8') > EXTRA_MAX_BYTES) {
    ctx.addIssue({ code: 'custom', message: `larger than ${EXTRA_MAX_BYTES} bytes as JSON` });
  }
});
