import { describe, expect, it } from 'vitest';
import { postMessage } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

describe('a worker killed mid-turn', () => {
  // Short leases and stall checks so recovery happens within the test's patience.
  const stack = useStack('e2e-crash', {
    roles: ['ingress'],
    latencyMs: [1, 5],
    env: { TURN_LEASE_MS: '1500', JOB_LOCK_MS: '1500', STALLED_INTERVAL_MS: '1000' },
  });
  const { store } = stack;

  it('kill -9 during the model call: another worker answers every message exactly once', async () => {
    const ingress = stack.ingressUrl();
    const chats = ['crash-a', 'crash-b', 'crash-c'];
    for (const c of chats) stack.mock.state.hold(c);
    const doomed = await stack.start('worker');
    for (const c of chats) {
      await postMessage(ingress, c, `${c}-1`, `${c} first`);
      await postMessage(ingress, c, `${c}-2`, `${c} second`);
    }
    // Every chat's turn is inside the model call on the doomed worker.
    await Promise.all(chats.map((c) => stack.mock.state.waitForRequest(c, 1)));
    await doomed.kill('SIGKILL');
    for (const c of chats) stack.mock.state.release(c);

    await stack.start('worker');
    await waitFor(
      async () => {
        for (const c of chats) {
          if ((await store.pendingCount(c)) > 0) return false;
          if ((await store.readHistoryWindow(c, 1)).messages[0]?.role !== 'assistant') return false;
        }
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: 'recovery after kill -9' },
    );

    for (const c of chats) {
      const history = await store.readHistory(c);
      expect(history.filter((m) => m.role === 'user').map((m) => m.id)).toEqual([`${c}-1`, `${c}-2`]);
      expect(history.at(-1)?.role).toBe('assistant');
      const types = (await store.readEvents(c, undefined, 100)).map((e) => e.type);
      // The survivor took over a lease the dead worker never released.
      expect(types).toContain('lease.takeover');
    }
    expect(stack.mock.state.violations).toEqual([]);
  }, 60_000);
});
