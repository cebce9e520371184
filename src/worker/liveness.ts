/**
 * How a worker shows it is alive: the turn lease (TURN_LEASE_MS, renewed by the lane) and
 * BullMQ's job lock (JOB_LOCK_MS, renewed by BullMQ) are both renewed about ten times per
 * period. Both must survive a worker that is slow — event loop blocked, GC pause, a frozen
 * VM — yet run out soon after a worker that died, because a dead worker's chats wait for
 * them. A stall of S ms is survived when (period − renewal interval − S) > 0: at the
 * defaults (10 s, renewed every 1–2 s) a 5 s stall leaves ≥ 3 s to spare, and a killed
 * worker's chats are taken over within JOB_LOCK_MS + STALLED_INTERVAL_MS (≈ 11 s). See
 * docs/DESIGN.md, "Recovery", for the arithmetic and why this rather than a heartbeat key.
 */
export const RENEWALS_PER_PERIOD = 10;

/** How often a lease of `periodMs` is renewed. */
export function renewalInterval(periodMs: number): number {
  return Math.max(10, Math.floor(periodMs / RENEWALS_PER_PERIOD));
}

/**
 * BullMQ's `lockRenewTime` for a lock of `lockMs`. BullMQ checks every lockRenewTime / 2 and
 * renews the locks older than lockRenewTime / 2, so a lock is renewed every one to two
 * checks: passing twice our interval makes that every `renewalInterval` to twice it.
 */
export function bullmqLockRenewTime(lockMs: number): number {
  return 2 * renewalInterval(lockMs);
}
