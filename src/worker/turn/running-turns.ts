import type { Lane } from './lane.js';
import { renewalInterval } from './liveness.js';

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
   * The renewals one check issues go out together through ioredis's auto-pipelining (each
   * still its own fenced renew.lua call on its chat's keys, so Redis Cluster works).
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
    this.renewTimer = setInterval(() => {
      const now = Date.now();
      for (const lane of this.lanes) void lane.renewIfDue(now);
    }, everyMs);
    this.renewTimer.unref();
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
