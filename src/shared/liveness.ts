/**
 * How a worker shows it is alive: the turn lease (TURN_LEASE_MS, renewed by the lane) and
 * BullMQ's job lock (JOB_LOCK_MS, renewed by BullMQ). Both must survive a worker that is
 * slow — event loop blocked, GC pause, a frozen VM — yet run out soon after a worker that
 * died, because a dead worker's chats wait for them.
 *
 * The lease is checked every `renewalInterval` (a twentieth of it) but renewed only once it
 * is `renewAfter` old (a quarter of it): most turns end before that and never renew, a long
 * one renews every quarter lease or so, not every tenth. In the worst case a stall begins
 * just before the check that would renew, so a stall of S ms is survived when
 * period − maxRenewalGap − S > 0, maxRenewalGap = renewAfter + renewalInterval: at the
 * defaults (10 s lease, gap ≤ 3 s) a 5 s stall leaves 2 s to spare; the job lock (renewed
 * every 1–2 s) leaves 3 s. A killed worker's chats are taken over within JOB_LOCK_MS +
 * STALLED_INTERVAL_MS (≈ 11 s). See docs/design.md, "Recovery", for the arithmetic and why
 * this rather than a heartbeat key.
 */
export const CHECKS_PER_LEASE = 20;

/** A lease is renewed once this share of it has passed since it was last set (1/4). */
export const RENEW_AFTER_SHARE = 0.25;

/** How often the leases of period `periodMs` are checked (and renewed when due). */
export function renewalInterval(periodMs: number): number {
  return Math.max(10, Math.floor(periodMs / CHECKS_PER_LEASE));
}

/** How long after it was last set a lease of `periodMs` is renewed at the next check. */
export function renewAfter(periodMs: number): number {
  return Math.floor(periodMs * RENEW_AFTER_SHARE);
}

/** The longest a running turn's lease goes without a renewal on a free event loop. */
export function maxRenewalGap(periodMs: number): number {
  return renewAfter(periodMs) + renewalInterval(periodMs);
}

/**
 * BullMQ's `lockRenewTime` for a lock of `lockMs`: a fifth of it. BullMQ checks every
 * lockRenewTime / 2 and renews the locks older than lockRenewTime / 2, so a lock is renewed
 * every tenth to fifth of its period.
 */
export function bullmqLockRenewTime(lockMs: number): number {
  return Math.max(20, Math.floor(lockMs / 5));
}
