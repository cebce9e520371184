import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { maxRenewalGap, renewalInterval } from '../../src/shared/liveness.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatStore, LeaseRenewal } from '../../src/shared/store/chat-store.js';
import { Lane } from '../../src/worker/turn/lane.js';
import { RunningTurns } from '../../src/worker/turn/running-turns.js';

const LEASE_MS = 10_000;

/**
 * The lease as Redis keeps it, on the (fake) clock: acquire and renew set leaseUntil =
 * now + lease; a renewal that finds the lease expired is refused, as renew.lua refuses one
 * after another worker took the expired lease over.
 */
function leaseStore() {
  const lease = { until: 0, renewals: 0, refused: 0, batches: [] as number[] };
  const store = {
    acquire: async (_chatKey: string, _owner: string, leaseMs: number) => {
      lease.until = Date.now() + leaseMs;
      return { ok: true as const, fence: '1', uncommitted: [] };
    },
    renew: async (_c: string, _o: string, _f: string, leaseMs: number) => {
      if (Date.now() >= lease.until) {
        lease.refused++;
        return false;
      }
      lease.renewals++;
      lease.until = Date.now() + leaseMs;
      return true;
    },
    // One call for many chats' leases (one lease here, as many times as asked), counted.
    renewMany: async (leases: LeaseRenewal[]) => {
      lease.batches.push(leases.length);
      return Promise.all(leases.map((l) => store.renew(l.chatKey, l.owner, l.fence, l.leaseMs)));
    },
    finish: async () => ({ ok: true, pending: 0 }),
    // REDIS_REPLICA_ACKS off: nothing to confirm.
    markWrite: () => undefined,
    confirmWrite: async () => undefined,
  };
  return { lease, store: store as unknown as ChatStore };
}

/** A lane whose renewals are driven from outside (RunningTurns, or the test by hand). */
async function acquireLane(store: ChatStore): Promise<Lane> {
  const lane = await Lane.acquire(store, {
    chatKey: 'c1',
    owner: 'w:run',
    runId: 'run',
    leaseMs: LEASE_MS,
    logger: silentLogger(),
    renewedElsewhere: true,
  });
  if (!(lane instanceof Lane)) throw new Error('not acquired');
  return lane;
}

async function trackedLane(store: ChatStore, running: RunningTurns) {
  const lane = await acquireLane(store);
  running.track(lane);
  return { lane, untrack: () => running.untrack(lane) };
}

describe('turn lease renewal', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a turn that ends within a quarter of its lease sends no renewal', async () => {
    const { lease, store } = leaseStore();
    const running = new RunningTurns();
    const { lane, untrack } = await trackedLane(store, running);
    await vi.advanceTimersByTimeAsync(LEASE_MS / 4 - 1);
    untrack();
    await lane.release();
    await vi.advanceTimersByTimeAsync(LEASE_MS);
    expect(lease.renewals).toBe(0);
    expect(lane.lost).toBe(false);
  });

  it('RunningTurns sends the renewals due at one check in one call, and each lane learns its own outcome', async () => {
    const { lease, store } = leaseStore();
    const running = new RunningTurns();
    const lanes = [
      await trackedLane(store, running),
      await trackedLane(store, running),
      await trackedLane(store, running),
    ];
    await vi.advanceTimersByTimeAsync(LEASE_MS / 4 + renewalInterval(LEASE_MS));
    expect(lease.batches).toEqual([3]);
    expect(lease.renewals).toBe(3);
    // The next due check finds the lease lapsed (as after a partition): every lane is lost.
    vi.setSystemTime(lease.until);
    await vi.advanceTimersByTimeAsync(LEASE_MS / 4);
    expect(lease.batches).toEqual([3, 3]);
    expect(lanes.map(({ lane }) => lane.lost)).toEqual([true, true, true]);
    for (const { untrack } of lanes) untrack();
  });

  it('a check before the lease is due sends nothing and answers the same settled promise every time', async () => {
    const { lease, store } = leaseStore();
    const lane = await acquireLane(store);
    const other = await acquireLane(store);
    const at = Date.now() + LEASE_MS / 4 - 1;
    const first = lane.renewIfDue(at);
    expect(lane.renewIfDue(at)).toBe(first);
    expect(other.renewIfDue(at)).toBe(first);
    await first;
    expect(lease.renewals).toBe(0);
    const due = lane.renewIfDue(Date.now() + LEASE_MS / 4);
    expect(due).not.toBe(first);
    await due;
    expect(lease.renewals).toBe(1);
  });

  it('a renewal that fails is not a rejection and is sent again at the next check; one the fence refuses stops the turn', async () => {
    const { lease, store } = leaseStore();
    const lane = await acquireLane(store);
    const renew = store.renew.bind(store);
    let failNext = true;
    store.renew = async (...args: Parameters<ChatStore['renew']>) => {
      if (failNext) {
        failNext = false;
        throw new Error('connection reset');
      }
      return renew(...args);
    };
    const due = Date.now() + LEASE_MS / 4;
    await expect(lane.renewIfDue(due)).resolves.toBeUndefined();
    expect(lease.renewals).toBe(0);
    await lane.renewIfDue(due + renewalInterval(LEASE_MS));
    expect(lease.renewals).toBe(1);
    expect(lane.lost).toBe(false);
    vi.setSystemTime(lease.until);
    await lane.renewIfDue(lease.until + LEASE_MS);
    expect(lease.refused).toBe(1);
    expect(lane.lost).toBe(true);
    expect(lane.signal.aborted).toBe(true);
  });

  it('a step that timed out leaves the lane neither lost nor stopped and still renewing; a later loss or stop is still told apart', async () => {
    const { lease, store } = leaseStore();
    const running = new RunningTurns();
    const { lane } = await trackedLane(store, running);
    lane.armStep(1000);
    await vi.advanceTimersByTimeAsync(1000);
    expect((lane.signal.reason as DOMException).name).toBe('TimeoutError');
    expect(lane.lost).toBe(false);
    expect(lane.stopped).toBe(false);
    await vi.advanceTimersByTimeAsync(LEASE_MS / 2);
    expect(lease.renewals).toBeGreaterThan(0);

    running.stopAll('worker shutting down');
    expect(lane.stopped).toBe(true);
    expect(lane.lost).toBe(false);
    expect(lane.ended?.name).toBe('TurnAbortedError');

    const other = await acquireLane(store);
    other.armStep(1000);
    await vi.advanceTimersByTimeAsync(1000);
    other.markLost('renew rejected');
    expect(other.lost).toBe(true);
    expect(other.ended?.message).toBe('lane lost: renew rejected');
  });

  it('a turn running for six leases keeps its lease, renewed about every quarter lease, never lapsing', async () => {
    const { lease, store } = leaseStore();
    const running = new RunningTurns();
    const { lane, untrack } = await trackedLane(store, running);
    let lastRenewals = 0;
    let lastRenewedAt = Date.now();
    for (let t = 0; t < 6 * LEASE_MS; t += renewalInterval(LEASE_MS)) {
      await vi.advanceTimersByTimeAsync(renewalInterval(LEASE_MS));
      expect(Date.now()).toBeLessThan(lease.until);
      if (lease.renewals > lastRenewals) {
        expect(Date.now() - lastRenewedAt).toBeLessThanOrEqual(maxRenewalGap(LEASE_MS));
        lastRenewals = lease.renewals;
        lastRenewedAt = Date.now();
      }
    }
    // A quarter lease plus up to one check between renewals: 20 to 24 in six leases.
    expect(lease.renewals).toBeGreaterThanOrEqual(20);
    expect(lease.renewals).toBeLessThanOrEqual(24);
    expect(lease.refused).toBe(0);
    expect(lane.lost).toBe(false);
    untrack();
  });

  it('an event loop blocked for 5 s at the worst moment still renews before the lease runs out, with 2 s to spare', async () => {
    // Checks run every `every` ms from a phase of the process's timer, except while the loop
    // is blocked [stallAt, stallAt + 5 s); the overdue check runs as soon as it unblocks.
    const every = renewalInterval(LEASE_MS);
    const step = every / 5;
    let minSpare = Number.POSITIVE_INFINITY;
    for (let phase = 0; phase < every; phase += step) {
      for (let stallAt = step; stallAt < 2 * maxRenewalGap(LEASE_MS); stallAt += step) {
        vi.setSystemTime(0);
        const { lease, store } = leaseStore();
        const lane = await acquireLane(store);
        const resumeAt = stallAt + 5000;
        let check = phase;
        let resumed = false;
        while (check < resumeAt + LEASE_MS) {
          const at = check >= stallAt && !resumed ? resumeAt : check;
          if (at === resumeAt) resumed = true;
          vi.setSystemTime(at);
          const untilBefore = lease.until;
          const renewalsBefore = lease.renewals;
          await lane.renewIfDue(at);
          if (lease.renewals > renewalsBefore) minSpare = Math.min(minSpare, untilBefore - at);
          check = at === resumeAt ? resumeAt + every : check + every;
        }
        expect(lease.refused).toBe(0);
        expect(lane.lost).toBe(false);
      }
    }
    expect(minSpare).toBeGreaterThanOrEqual(2000);
    expect(minSpare).toBeLessThan(2000 + 2 * step);
  });
});
