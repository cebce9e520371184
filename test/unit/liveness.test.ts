import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config.js';
import {
  bullmqLockRenewTime,
  maxRenewalGap,
  renewAfter,
  renewalInterval,
} from '../../src/shared/liveness.js';

/**
 * The arithmetic of docs/design.md "Recovery" on the default settings: the e2e tests
 * (crash.test.ts, slow-worker.test.ts) prove the behaviour; this pins the margins.
 */
describe('default liveness settings', () => {
  const c = loadConfig({});
  /** Worst case: a stall starting just before the check that would renew (lease-renewal.test.ts). */
  const leaseSlack = (stallMs: number) => c.TURN_LEASE_MS - maxRenewalGap(c.TURN_LEASE_MS) - stallMs;
  // BullMQ renews a lock at most lockRenewTime after the last renewal (every other check).
  const lockSlack = (stallMs: number) => c.JOB_LOCK_MS - bullmqLockRenewTime(c.JOB_LOCK_MS) - stallMs;

  it('a worker stalled for 5 s keeps its lease and its job lock, with seconds to spare', () => {
    expect(leaseSlack(5000)).toBeGreaterThanOrEqual(2000);
    expect(lockSlack(5000)).toBeGreaterThanOrEqual(3000);
  });

  it("a dead worker's chats are taken over well within 15 s: lock + stall check, lease no longer", () => {
    const jobBack = c.JOB_LOCK_MS + c.STALLED_INTERVAL_MS;
    expect(jobBack).toBeLessThanOrEqual(12_000);
    // The lease has run out by the time the job is back, so the retry takes over at once.
    expect(c.TURN_LEASE_MS).toBeLessThanOrEqual(c.JOB_LOCK_MS);
  });

  it('scales: every interval is a fixed share of its period', () => {
    expect(renewalInterval(10_000)).toBe(500);
    expect(renewalInterval(1000)).toBe(50);
    expect(renewAfter(10_000)).toBe(2500);
    expect(renewAfter(1000)).toBe(250);
    expect(bullmqLockRenewTime(10_000)).toBe(2000);
    expect(bullmqLockRenewTime(1000)).toBe(200);
  });
});
