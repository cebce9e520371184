import { FencedOutError } from '../../../shared/errors.js';
import type { Logger } from '../../../shared/logger.js';
import type { ChatStore } from '../../../shared/store/chat-store.js';
import {
  beginOnce,
  endOnce,
  ONCE_KEY_MAX_CHARS,
  type OnceLimits,
  type OnceResult,
} from '../../../shared/store/once.js';

/** What `fn` of `once(key, fn)` is told: `attempt` > 1 when an earlier run of fn for this key did not store a result. */
export type OnceRun = { attempt: number };

/**
 * `once(key, fn)`: runs `fn` at most once per chat and key once its result is stored, and
 * answers every later call (this turn's, a retried turn's, a later turn's) with that result.
 * A fn that did not store its result (its worker died, it threw, its turn lost the chat) runs
 * again on the next call, as the next attempt. The result comes back as stored: through JSON.
 */
export type OnceFunction = <T>(key: string, fn: (run: OnceRun) => T | Promise<T>) => Promise<T>;

/** A once call whose fn ran but whose result cannot be returned (not JSON, or over ONCE_RESULT_MAX_BYTES). */
export class OnceResultError extends Error {
  override name = 'OnceResultError';
}

/** What `once` needs of its turn. */
export interface OnceTurn {
  store: ChatStore;
  chatKey: string;
  fence: string;
  runId: string;
  logger: Logger;
  limits: OnceLimits;
  /** Told when the fence refused a once write: another turn holds the chat, this one must stop. */
  fencedOut: (reason: string) => void;
}

/** The turn's `once`: one per turn, so calls of one key within the turn share one run. */
export function createOnce(turn: OnceTurn): OnceFunction {
  const calls = new Map<string, Promise<unknown>>();
  return <T>(key: string, fn: (run: OnceRun) => T | Promise<T>): Promise<T> => {
    if (typeof key !== 'string' || key.length === 0 || key.length > ONCE_KEY_MAX_CHARS) {
      return Promise.reject(new TypeError(`once: the key must be 1–${ONCE_KEY_MAX_CHARS} characters`));
    }
    if (typeof fn !== 'function') return Promise.reject(new TypeError('once: fn must be a function'));
    let call = calls.get(key);
    if (!call) {
      const started = runOnce(turn, key, fn);
      // A failed call is not remembered: the next call of the key in this turn tries again.
      started.catch(() => {
        if (calls.get(key) === started) calls.delete(key);
      });
      calls.set(key, started);
      call = started;
    }
    return call as Promise<T>;
  };
}

async function runOnce<T>(turn: OnceTurn, key: string, fn: (run: OnceRun) => T | Promise<T>): Promise<T> {
  const { store, chatKey, limits } = turn;
  const call = { fence: turn.fence, runId: turn.runId, key };
  const begun = await beginOnce(store, chatKey, call, limits);
  if (begun.status === 'fenced-out') throw fencedOut(turn, key);
  if (begun.status === 'done') return storedValue<T>(key, begun.result);
  const value = await fn({ attempt: begun.attempt });
  const encoded = encode(value, limits.maxBytes);
  const mark = store.markWrite(chatKey);
  const ended = await endOnce(store, chatKey, { ...call, ...encoded }, limits);
  if (ended.status === 'fenced-out') throw fencedOut(turn, key);
  await store.confirmWrite(mark).catch((err: unknown) => {
    // The result is on the primary; only a failover before the replicas have it loses it.
    turn.logger.warn(
      { err, onceKey: key },
      'once result not confirmed on replicas; a failover may run fn again',
    );
  });
  return storedValue<T>(key, ended.result);
}

function fencedOut(turn: OnceTurn, key: string): FencedOutError {
  turn.fencedOut(`once write rejected (${key})`);
  return new FencedOutError('once');
}

/** fn's result as stored: JSON text, or why it cannot be kept (fn ran all the same). */
function encode(value: unknown, maxBytes: number): { json: string | undefined; refused: string | undefined } {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    return { json: undefined, refused: `the result is not JSON (${(err as Error).message})` };
  }
  if (json === undefined) return { json: undefined, refused: undefined };
  const bytes = Buffer.byteLength(json);
  if (bytes > maxBytes) {
    return {
      json: undefined,
      refused: `the result is ${bytes} bytes as JSON, over ONCE_RESULT_MAX_BYTES (${maxBytes}): store an id, not the document`,
    };
  }
  return { json, refused: undefined };
}

function storedValue<T>(key: string, result: OnceResult): T {
  if (result.refused !== undefined) {
    throw new OnceResultError(
      `once(${JSON.stringify(key)}): fn ran (attempt ${result.attempt}) and is not run again, but its result was not kept: ${result.refused}`,
    );
  }
  return (result.json === undefined ? undefined : JSON.parse(result.json)) as T;
}
