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

  /** Track a running turn's lane until the returned function is called. A lane that starts after `stopAll` is stopped at once. */
  track(lane: Lane): () => void {
    if (this.stopReason !== undefined) {
      lane.stop(this.stopReason);
      return () => undefined;
    }
    this.lanes.add(lane);
    return () => {
      this.lanes.delete(lane);
    };
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
