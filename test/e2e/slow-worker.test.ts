import { Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { createQueue, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { postMessage, type RoleProcess } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { type Stack, useStack } from '../helpers/stack.js';

/** The echo model answers a turn in two calls: chat_send, then an empty final step. */
const CALLS_PER_TURN = 2;

/**
 * One turn of `chatKey` with two workers running: the one that takes it (found by the lease
 * owner, `host:pid:runId`) is the slow one, the other stands by and would take the chat over
 * if the slow one lost it. `stall` runs while the turn is inside its first model call.
 */
async function slowTurn(
  stack: Stack,
  chatKey: string,
  stall: (slow: RoleProcess) => Promise<void>,
): Promise<string> {
  stack.mock.state.hold(chatKey);
  await postMessage(stack.ingressUrl(), chatKey, `${chatKey}-1`, 'hello');
  await stack.mock.state.waitForRequest(chatKey, 1);
  const owner = (await stack.store.readMeta(chatKey)).owner ?? '';
  const slow = stack.procs.find((p) => owner.includes(`:${p.pid}:`));
  expect(slow, `the lease owner ${owner} is one of the workers`).toBeDefined();
  // The running job, found by its deduplication id while it is active.
  const turns = createQueue<TurnJob>(stack.prefix, QUEUES.turns, stack.redis);
  const jobId = await turns.getDeduplicationJobId(chatKey).finally(() => turns.close());
  expect(jobId).toBeTruthy();
  await stall(slow!);
  stack.mock.state.release(chatKey);
  await waitFor(
    async () => (await stack.store.readHistoryWindow(chatKey, 1)).messages[0]?.role === 'assistant',
    { timeoutMs: 20_000, what: `${chatKey} answered` },
  );
  return jobId!;
}

/** The turn ran once, on one worker, never lost or retried. */
async function expectOneUndisturbedTurn(stack: Stack, chatKey: string, jobId: string) {
  const types = (await stack.store.readEvents(chatKey, undefined, 100)).map((e) => e.type);
  expect(types).not.toContain('lease.takeover');
  expect(types).not.toContain('fence.rejected');
  expect(types.filter((t) => t === 'turn.committed')).toHaveLength(1);
  expect(stack.mock.state.perChat[chatKey]).toBe(CALLS_PER_TURN);
  expect(await stack.store.readOutbox(chatKey, undefined, 10)).toHaveLength(1);
  const turns = createQueue<TurnJob>(stack.prefix, QUEUES.turns, stack.redis);
  try {
    const job = await waitFor(async () => {
      const j = await Job.fromId<TurnJob>(turns, jobId);
      return j?.finishedOn ? j : undefined;
    });
    // BullMQ never saw the job stall (its lock held) and never started it twice.
    expect(job.stalledCounter).toBe(0);
    expect(job.attemptsStarted).toBe(1);
    expect(job.finishedOn! - job.processedOn!).toBeGreaterThan(0);
  } finally {
    await turns.close();
  }
}

describe('a slow worker keeps its turn', () => {
  describe('default liveness settings', () => {
    const stack = useStack('e2e-slow-stall', { roles: ['ingress', 'worker', 'worker'] });

    it('frozen for 5 s mid-turn (SIGSTOP, like a blocked event loop): no takeover, no second model call', async () => {
      const jobId = await slowTurn(stack, 'stall-5s', async (slow) => {
        slow.child.kill('SIGSTOP');
        await new Promise((r) => setTimeout(r, 5000));
        slow.child.kill('SIGCONT');
      });
      await expectOneUndisturbedTurn(stack, 'stall-5s', jobId);
    }, 60_000);
  });

  describe('a 60 s model call, at a tenth of every liveness setting', () => {
    // Scaled: lease, job lock and stall check are all a tenth of their defaults (10 s, 10 s,
    // 1 s), and so is the model timeout (120 s). Renewal intervals are derived from the
    // periods (a tenth of each), so every ratio of the mechanism is the defaults', and a
    // 6 s call here stands for a 60 s call in production.
    const stack = useStack('e2e-slow-call', {
      roles: ['ingress', 'worker', 'worker'],
      env: {
        TURN_LEASE_MS: '1000',
        JOB_LOCK_MS: '1000',
        STALLED_INTERVAL_MS: '100',
        LLM_TIMEOUT_MS: '12000',
      },
    });

    it('is never taken over and runs once', async () => {
      const jobId = await slowTurn(stack, 'call-60s', () => new Promise((r) => setTimeout(r, 6000)));
      await expectOneUndisturbedTurn(stack, 'call-60s', jobId);
    }, 60_000);
  });
});
