import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { postMessage, type RoleProcess, startRole } from '../helpers/processes.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

describe('a worker killed mid-turn', () => {
  const redis = testRedis();
  const prefix = randomPrefix('e2e-crash');
  const store = new ChatStore(redis, { prefix, maxEvents: 1000 });
  let mock: Awaited<ReturnType<typeof startMockLlm>>;
  const procs: RoleProcess[] = [];
  // Short leases and stall checks so recovery happens within the test's patience.
  let env: Record<string, string>;

  beforeAll(async () => {
    mock = await startMockLlm({ port: 0, latencyMs: [1, 5] });
    env = {
      CHATLANE_PREFIX: prefix,
      LLM_BASE_URL: mock.url,
      LLM_MODEL: 'mock',
      TURN_LEASE_MS: '1500',
      JOB_LOCK_MS: '1500',
      STALLED_INTERVAL_MS: '1000',
    };
    procs.push(await startRole('ingress', env));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill('SIGKILL')));
    await mock?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('kill -9 during the model call: another worker answers every message exactly once', async () => {
    const ingress = procs[0]!.url!;
    const chats = ['crash-a', 'crash-b', 'crash-c'];
    for (const c of chats) mock.state.hold(c);
    const doomed = await startRole('worker', env);
    procs.push(doomed);
    for (const c of chats) {
      await postMessage(ingress, c, `${c}-1`, `${c} first`);
      await postMessage(ingress, c, `${c}-2`, `${c} second`);
    }
    // Every chat's turn is inside the model call on the doomed worker.
    await Promise.all(chats.map((c) => mock.state.waitForRequest(c, 1)));
    await doomed.kill('SIGKILL');
    for (const c of chats) mock.state.release(c);

    const survivor = await startRole('worker', env);
    procs.push(survivor);
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
    expect(mock.state.violations).toEqual([]);
  }, 60_000);
});
