import { startMockLlm } from '../src/mock-llm/server.js';
import { loadConfig } from '../src/shared/config.js';
import { ChatStore } from '../src/shared/store/chat-store.js';
import { postMessage, type RoleProcess, startRole } from '../test/helpers/processes.js';
import { deletePrefix, testRedis, waitFor } from '../test/helpers/redis.js';
import { median, percentile, progress, randomPrefix, round } from './lib/util.js';

/**
 * Recovery after `kill -9`: real processes (`dist/cli.js`: ingress, two workers), the mock
 * model, default liveness settings. Each kill: `chats` chats are mid-model-call on the doomed
 * worker (held by the mock), a survivor is running, the doomed worker gets SIGKILL and the
 * holds are released. Per chat it records kill → `lease.takeover` (another turn took the chat)
 * and kill → `turn.committed` (the user's messages answered). Event times are Redis's clock
 * (stream ids); the kill time is this host's clock (the same machine).
 */

export interface RecoveryOptions {
  kills: number;
  chats: number;
}

export const RECOVERY_DEFAULTS: RecoveryOptions = { kills: 5, chats: 8 };

const TARGET = { metric: 'answerMs.p99', comparator: '<=' as const, value: 15_000 };

function stats(values: number[]) {
  return {
    min: Math.min(...values),
    median: round(median(values), 0),
    p99: percentile(values, 99),
    max: Math.max(...values),
  };
}

export async function benchRecovery(opts: RecoveryOptions) {
  const config = loadConfig();
  const redis = testRedis();
  const mock = await startMockLlm({ port: 0, latencyMs: [1, 5] });
  const takeoverMs: number[] = [];
  const answerMs: number[] = [];
  const expiredMs: number[] = [];
  try {
    for (let kill = 0; kill < opts.kills; kill++) {
      const prefix = randomPrefix(`recovery${kill}`);
      const store = new ChatStore(redis, { prefix, maxEvents: 1000 });
      const env = { CHATLANE_PREFIX: prefix, LLM_BASE_URL: mock.url, LLM_MODEL: 'mock', LOG_LEVEL: 'warn' };
      const procs: RoleProcess[] = [];
      try {
        procs.push(await startRole('ingress', { ...env, LOG_LEVEL: 'info' }));
        const ingress = procs[0]!.url!;
        const chats = Array.from({ length: opts.chats }, (_, i) => `recovery-${kill}-${i}`);
        for (const c of chats) mock.state.hold(c);
        const doomed = await startRole('worker', { ...env, LOG_LEVEL: 'info' });
        procs.push(doomed);
        for (const c of chats) await postMessage(ingress, c, `${c}-1`, 'hello');
        await Promise.all(chats.map((c) => mock.state.waitForRequest(c, 1)));
        procs.push(await startRole('worker', { ...env, LOG_LEVEL: 'info' }));

        const killedAt = Date.now();
        await doomed.kill('SIGKILL');
        for (const c of chats) mock.state.release(c);
        await waitFor(
          async () => {
            for (const c of chats) {
              const events = await store.readEvents(c, undefined, 100);
              if (!events.some((e) => e.type === 'turn.committed')) return false;
            }
            return true;
          },
          { timeoutMs: 120_000, intervalMs: 100, what: 'every chat answered after the kill' },
        );
        for (const c of chats) {
          const events = await store.readEvents(c, undefined, 100);
          const takeover = events.find((e) => e.type === 'lease.takeover');
          const committed = events.find((e) => e.type === 'turn.committed');
          if (takeover) {
            takeoverMs.push(takeover.ts - killedAt);
            expiredMs.push(Number(takeover.data.expiredMs));
          }
          answerMs.push(committed!.ts - killedAt);
        }
        progress(
          `recovery kill ${kill + 1}/${opts.kills}: worst answer ${Math.max(...answerMs.slice(-opts.chats))} ms`,
        );
      } finally {
        await Promise.all(procs.map((p) => p.kill('SIGKILL')));
        await deletePrefix(redis, prefix);
      }
    }
  } finally {
    await mock.close();
    redis.disconnect();
  }
  const answer = stats(answerMs);
  return {
    description:
      `kill -9 of a worker holding ${opts.chats} chats mid-model-call, ${opts.kills} times; a second worker runs. ` +
      'takeoverMs: kill → another turn took the chat (lease.takeover); answerMs: kill → the turn that answered ' +
      'committed; leaseExpiredMs: how long the dead lease had expired when it was taken over.',
    settings: {
      TURN_LEASE_MS: config.TURN_LEASE_MS,
      JOB_LOCK_MS: config.JOB_LOCK_MS,
      STALLED_INTERVAL_MS: config.STALLED_INTERVAL_MS,
    },
    samples: answerMs.length,
    takeoverMs: stats(takeoverMs),
    answerMs: answer,
    leaseExpiredMs: stats(expiredMs),
    target: TARGET,
    meetsTarget: answer.p99 <= TARGET.value,
  };
}
