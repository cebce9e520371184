import type { LaneSettings } from './lane-policy.js';
import type { LaneState } from './store/records.js';

/**
 * How long the turn of a chat that just got a message should wait (LANE_DEBOUNCE_MS, per
 * channel): 0 when the lane is busy (a running turn merges the message, or the next turn
 * takes it at once, as without debounce) or debounce is off; otherwise the debounce, cut so
 * the turn starts at the latest `debounceMaxMs` after the burst's first message (the oldest
 * pending one). Both times are Redis's clock, read by the ingest script, so every ingress
 * measures the same burst the same way; nothing waits in an ingress.
 *
 * The wait is BullMQ's: the chat's turn job is added delayed by this, or — when it already
 * waits delayed — moved to this far from now (`enqueueTurn`). Each message of the burst
 * moves it again, never past the cap: once the cap is reached the delay is 0 and the job
 * keeps the time the previous message gave it, which is the cap.
 */
export function debounceDelay(
  settings: Pick<LaneSettings, 'debounceMs' | 'debounceMaxMs'>,
  lane: LaneState | undefined,
): number {
  if (!lane || lane.leased || settings.debounceMs <= 0) return 0;
  const waited = Math.max(0, lane.nowMs - lane.oldestMs);
  return Math.max(0, Math.min(settings.debounceMs, settings.debounceMaxMs - waited));
}
