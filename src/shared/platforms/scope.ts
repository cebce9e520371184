import { AsyncLocalStorage } from 'node:async_hooks';
import type { StateAdapter } from 'chat';

/**
 * What one platform webhook request (or one polled update) set in motion inside the Chat SDK.
 * The SDK runs our message handler detached from the request (it hands the work to
 * `waitUntil` and swallows handler errors), so the request keeps its own books here, carried
 * through the SDK's async calls by AsyncLocalStorage:
 * - `tasks`: what `waitUntil` was given; the response waits for all of it;
 * - `outcomes` / `errors`: what the handler did with each message, so an ingest failure
 *   answers 5xx (the platform retries) instead of the SDK's unconditional 200;
 * - `claims`: dedup keys the SDK set (`setIfNotExists`) during the request. chatlane's ingest
 *   is the idempotency authority (message.id), and a claim that outlives a failed ingest would
 *   make the SDK drop the platform's retry as a duplicate: the request deletes its claims when
 *   it ends, so Redis holds after a platform request exactly what the ingest stored.
 */
export interface RequestScope {
  tasks: Promise<unknown>[];
  outcomes: string[];
  errors: unknown[];
  claims: string[];
}

export const requestScope = new AsyncLocalStorage<RequestScope>();

export function newRequestScope(): RequestScope {
  return { tasks: [], outcomes: [], errors: [], claims: [] };
}

/** `state` with its `setIfNotExists` claims recorded in the current request scope. */
export function scopedState(state: StateAdapter): StateAdapter {
  return new Proxy(state, {
    get(target, prop, receiver) {
      if (prop === 'setIfNotExists') {
        return async (key: string, value: unknown, ttlMs?: number) => {
          const claimed = await target.setIfNotExists(key, value, ttlMs);
          if (claimed) requestScope.getStore()?.claims.push(key);
          return claimed;
        };
      }
      const member = Reflect.get(target, prop, receiver);
      return typeof member === 'function' ? member.bind(target) : member;
    },
  });
}

/** Waits for every task handed to `waitUntil`, including tasks added while waiting. */
export async function settleScope(scope: RequestScope): Promise<void> {
  for (let done = 0; done < scope.tasks.length; ) {
    const batch = scope.tasks.slice(done);
    done = scope.tasks.length;
    await Promise.allSettled(batch);
  }
}

/** Deletes the request's SDK claims (see `RequestScope.claims`); never throws. */
export async function releaseClaims(state: StateAdapter, scope: RequestScope): Promise<void> {
  const keys = scope.claims.splice(0);
  await Promise.allSettled(keys.map((k) => state.delete(k)));
}
