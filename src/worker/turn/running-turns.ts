import { renewalInterval } from '../../shared/liveness.js';
import type { ChatStore, LeaseRenewal } from '../../shared/store/chat-store.js';
import type { Lane } from './lane.js';

/**
 * The turns running in this process, so that a shutdown whose grace ran out can stop them
 * all. A set the shutdown walks, rather than one `abort` listener per turn on a shared
 * AbortSignal: with more than ten turns at once those listeners tripped Node's
 * MaxListenersExceededWarning — on every busy worker, for what is not a leak.
 */
export class RunningTurns {
  private readonly lanes = new Set<Lane>();
  private stopReason: string | undefined;
  /**
   * Checks the lease of every tracked lane on one timer: a timer per turn at 2,000 turns in
   * flight was 2,000 wake-ups per interval. Each check renews only the leases that are due
   * (set renewAfter ago, see liveness.ts): a turn that ends sooner sends no renewal at all.
   * The renewals one check issues go out in one fenced renew-many.lua call (per RENEW_BATCH
   * leases): a saturated worker's turns run for several quarter leases each; at 2,000 in flight
   * a call per lease was 3.6 of a turn's ~9 Redis calls (redis-cli monitor). On Redis Cluster, where the chats' keys are in
   * different slots, each lease is its own renew.lua call, sent together by auto-pipelining.
   */
  private renewTimer: NodeJS.Timeout | undefined;
  private renewEveryMs = Number.POSITIVE_INFINITY;

  /**
   * Track a running turn's lane until `untrack(lane)`. A lane that starts after `stopAll` is
   * stopped at once. (No closure per turn to untrack it: at thousands of turns in flight
   * each one is held for the whole turn.)
   */
  track(lane: Lane): void {
    if (this.stopReason !== undefined) {
      lane.stop(this.stopReason);
      return;
    }
    this.lanes.add(lane);
    this.scheduleRenewals(renewalInterval(lane.leaseMs));
  }

  /** The lane's turn has ended (a lane never tracked, or already untracked, is ignored). */
  untrack(lane: Lane): void {
    if (this.lanes.delete(lane) && this.lanes.size === 0) this.stopRenewals();
  }

  private scheduleRenewals(everyMs: number): void {
    // The shortest interval any tracked lane needs (all share TURN_LEASE_MS in a worker).
    if (this.renewTimer && everyMs >= this.renewEveryMs) return;
    this.stopRenewals();
    this.renewEveryMs = everyMs;
    this.renewTimer = setInterval(() => this.renewDue(Date.now()), everyMs);
    this.renewTimer.unref();
  }

  /** The renewals due now of every tracked lane, together (one call per store and batch). */
  private renewDue(now: number): void {
    let due: Map<ChatStore, Due[]> | undefined;
    for (const lane of this.lanes) {
      const renewal = lane.renewalDue(now);
      if (!renewal) continue;
      due ??= new Map();
      const list = due.get(lane.store);
      if (list) list.push({ lane, renewal });
      else due.set(lane.store, [{ lane, renewal }]);
    }
    for (const [store, list] of due ?? []) {
      for (let i = 0; i < list.length; i += RENEW_BATCH)
        void renewTogether(store, list.slice(i, i + RENEW_BATCH), now);
    }
  }

  private stopRenewals(): void {
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    this.renewEveryMs = Number.POSITIVE_INFINITY;
  }

  /** Stop every running turn (and any that starts later): each aborts its model call, commits nothing, releases its lease. */
  stopAll(reason: string): void {
    this.stopReason ??= reason;
    for (const lane of this.lanes) lane.stop(reason);
  }

  get size(): number {
    return this.lanes.size;
  }
}

/** Leases one renew-many.lua call renews at most: the script runs a few µs per lease, and Redis serves nothing else meanwhile. */
const RENEW_BATCH = 500;

interface Due {
  lane: Lane;
  renewal: LeaseRenewal;
}

/** One call for `due`'s renewals; each lane is told how its own went. Never rejects. */
async function renewTogether(store: ChatStore, due: Due[], sentAt: number): Promise<void> {
  try {
    const renewed = await store.renewMany(due.map((d) => d.renewal));
    for (const [i, d] of due.entries()) d.lane.renewalSettled(sentAt, renewed[i] === true);
  } catch (err) {
    for (const d of due) d.lane.renewalSettled(sentAt, undefined, err);
  }
}
