import { describe, expect, it } from 'vitest';
import { postMessage } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

/**
 * With the default TURN_LEASE_MS and JOB_LOCK_MS (10 s each) and STALLED_INTERVAL_MS (1 s), a
 * killed worker's turns are found and taken over about 11 s after the kill (the recovery
 * benchmark: p99 10.3 s against its 15 s target). How fast is the benchmark's to say: on a
 * loaded CI box one run took 15.03 s. This bound proves the path — the stall check and the
 * lease takeover, long before the sweeper (which this stack runs once every 10 minutes)
 * could have found the chats — not the speed.
 */
const RECOVERY_BOUND_MS = 25_000;
const SWEEP_INTERVAL_MS = 600_000;

describe('a worker killed mid-turn', () => {
  // Default TURN_LEASE_MS, JOB_LOCK_MS and STALLED_INTERVAL_MS: the takeover rests on them.
  const stack = useStack('e2e-crash', {
    roles: ['ingress'],
    latencyMs: [1, 5],
    env: { SWEEP_INTERVAL_MS: String(SWEEP_INTERVAL_MS) },
  });
  const { store } = stack;

  it('kill -9 during the model call: another worker takes every chat over through its stall check and lease, not the sweeper, and answers every message exactly once', async () => {
    const ingress = stack.ingressUrl();
    const chats = ['crash-a', 'crash-b', 'crash-c', 'crash-d', 'crash-e', 'crash-f'];
    for (const c of chats) stack.mock.state.hold(c);
    const doomed = await stack.start('worker');
    for (const c of chats) {
      await postMessage(ingress, c, `${c}-1`, `${c} first`);
      await postMessage(ingress, c, `${c}-2`, `${c} second`);
    }
    // Every chat's turn is inside the model call on the doomed worker.
    await Promise.all(chats.map((c) => stack.mock.state.waitForRequest(c, 1)));
    const survivor = await stack.start('worker');

    const killedAt = Date.now();
    await doomed.kill('SIGKILL');
    for (const c of chats) stack.mock.state.release(c);

    await waitFor(
      async () => {
        for (const c of chats) {
          if ((await store.pendingCount(c)) > 0) return false;
          if ((await store.readHistoryWindow(c, 1)).messages[0]?.role !== 'assistant') return false;
        }
        return true;
      },
      { timeoutMs: 40_000, intervalMs: 200, what: 'recovery after kill -9' },
    );

    for (const c of chats) {
      const history = await store.readHistory(c);
      expect(history.filter((m) => m.role === 'user').map((m) => m.id)).toEqual([`${c}-1`, `${c}-2`]);
      expect(history.at(-1)?.role).toBe('assistant');
      const events = await store.readEvents(c, undefined, 100);
      // The survivor took over the lease the dead worker never released, and committed.
      const takeover = events.find((e) => e.type === 'lease.takeover');
      const committed = events.filter((e) => e.type === 'turn.committed');
      expect(takeover, c).toBeDefined();
      expect(committed).toHaveLength(1);
      expect(String(committed[0]!.data.worker)).toMatch(new RegExp(`:${survivor.pid}$`));
      // Redis's clock stamps the events; this host's clock stamped the kill.
      expect(takeover!.ts - killedAt, `${c}: kill → takeover`).toBeLessThanOrEqual(RECOVERY_BOUND_MS);
      expect(committed[0]!.ts - killedAt, `${c}: kill → answer`).toBeLessThanOrEqual(RECOVERY_BOUND_MS);
    }
    expect(stack.mock.state.violations).toEqual([]);
  }, 60_000);
});
