import { parseLoadtestArgs } from '../src/loadtest/options.js';
import { runLoadtest } from '../src/loadtest/run.js';
import { type RoleProcess, startRole } from '../test/helpers/processes.js';
import { startMock } from './lib/fleet.js';
import {
  adminRedis,
  deletePrefix,
  median,
  progress,
  pushTo,
  REDIS_URL,
  randomPrefix,
  round,
} from './lib/util.js';

/**
 * Lane policies against people typing in bursts (docs/lane-policies.md): `chatlane loadtest
 * --profile typing` (closed loop; every step 2-4 messages 300-900 ms apart, then the user waits
 * for the answer and thinks) on the same seed against one ingress and one worker per policy —
 * merge, debounce 1,000 and 1,500 ms, interrupt — with the mock model answering each request
 * after `latencyMs`. Per burst: model calls (the mock counts them, aborted ones too), replies,
 * replies given before the burst's last message, and the time from the burst's last message to
 * its reply.
 */

export interface LanesOptions {
  runs: number;
  chats: number;
  messagesPerChat: number;
  thinkMs: string;
  latencyMs: number;
  policies: Array<{ name: string; env: Record<string, string> }>;
}

export const LANES_DEFAULTS: LanesOptions = {
  runs: 3,
  chats: 40,
  messagesPerChat: 9,
  thinkMs: '1500-3000',
  latencyMs: 400,
  policies: [
    { name: 'merge', env: {} },
    { name: 'debounce 1000 ms', env: { LANE_DEBOUNCE_MS: '1000' } },
    { name: 'debounce 1500 ms', env: { LANE_DEBOUNCE_MS: '1500' } },
    { name: 'interrupt', env: { LANE_POLICY: 'interrupt' } },
  ],
};

export interface LanesPoint {
  bursts: number;
  modelCallsPerBurst: number | null;
  repliesPerBurst: number;
  earlyRepliesPerBurst: number;
  lastToReplyP50Ms: number;
  lastToReplyP90Ms: number;
  ok: boolean;
}

async function runOne(
  ingress: RoleProcess,
  mock: RoleProcess,
  opts: LanesOptions,
  seed: number,
  runId: string,
) {
  const parsed = parseLoadtestArgs([
    '--url',
    ingress.url!,
    '--mock-url',
    mock.url!,
    '--profile',
    'typing',
    '--chats',
    String(opts.chats),
    '--connections',
    String(opts.chats),
    '--messages',
    String(opts.messagesPerChat),
    '--think',
    opts.thinkMs,
    '--duration',
    '300',
    '--drain',
    '120',
    '--seed',
    String(seed),
    '--run-id',
    runId,
    '--replies',
    'stream',
    '--progress',
    'off',
  ]);
  if (parsed === 'help') throw new Error('unreachable');
  return (await runLoadtest(parsed)).report;
}

export async function benchLanes(opts: LanesOptions) {
  const mock = await startMock(opts.latencyMs);
  const prefixes: string[] = [];
  const byPolicy: Record<string, LanesPoint[]> = {};
  try {
    // Runs alternate the policies, so the machine's load drifts over all of them alike.
    for (let run = 0; run < opts.runs; run++) {
      for (const [p, policy] of opts.policies.entries()) {
        const prefix = randomPrefix('lanes');
        prefixes.push(prefix);
        const env = {
          REDIS_URL,
          CHATLANE_PREFIX: prefix,
          LLM_BASE_URL: mock.url!,
          LLM_MODEL: 'mock',
          ...policy.env,
        };
        const procs: RoleProcess[] = [];
        try {
          procs.push(await startRole('ingress', env, { timeoutMs: 60_000 }));
          procs.push(await startRole('worker', env, { timeoutMs: 60_000 }));
          // The same seed for every policy of a run: the same chats, bursts and pauses.
          const rep = await runOne(procs[0]!, mock, opts, run + 1, `lanes${run}p${p}`);
          const b = rep.bursts!;
          const point: LanesPoint = {
            bursts: b.bursts,
            modelCallsPerBurst: b.modelCallsPerBurst,
            repliesPerBurst: round(b.repliesPerBurst.mean, 2),
            earlyRepliesPerBurst: round(b.earlyReplies / Math.max(1, b.bursts), 2),
            lastToReplyP50Ms: b.lastMessageToReplyMs.p50,
            lastToReplyP90Ms: b.lastMessageToReplyMs.p90,
            ok: rep.ok,
          };
          pushTo(byPolicy, policy.name, point);
          progress(
            `lanes ${policy.name} run ${run + 1}: ${point.modelCallsPerBurst} calls and ${point.repliesPerBurst} replies ` +
              `per burst, last message → reply p50 ${point.lastToReplyP50Ms} ms, ${point.ok ? 'checks ok' : 'CHECKS FAILED'}`,
          );
        } finally {
          await Promise.allSettled(procs.map((proc) => proc.kill('SIGKILL')));
        }
      }
    }
  } finally {
    await mock.kill('SIGKILL');
    const admin = adminRedis();
    for (const prefix of prefixes) await deletePrefix(admin, prefix);
    admin.disconnect();
  }
  const table = Object.entries(byPolicy).map(([policy, runs]) => ({
    policy,
    modelCallsPerBurst: median(runs.map((r) => r.modelCallsPerBurst ?? Number.NaN)),
    repliesPerBurst: median(runs.map((r) => r.repliesPerBurst)),
    earlyRepliesPerBurst: median(runs.map((r) => r.earlyRepliesPerBurst)),
    lastToReplyP50Ms: median(runs.map((r) => r.lastToReplyP50Ms)),
    lastToReplyP90Ms: median(runs.map((r) => r.lastToReplyP90Ms)),
    ok: runs.every((r) => r.ok),
  }));
  return {
    description:
      `chatlane loadtest --profile typing (closed loop, ${opts.chats} users, ${opts.messagesPerChat} messages per chat ` +
      `in bursts of 2-4 messages 300-900 ms apart, think ${opts.thinkMs} ms, seed = run number for every policy) ` +
      `against one ingress and one worker per policy, the mock model answering each request after ${opts.latencyMs} ms; ` +
      'model calls per burst as the mock counted them (aborted calls included), replies per burst = outbox items, ' +
      "last → reply = from the burst's last message (sent) to its reply (the first its turn sent after storing it) seen on the chat's live stream",
    settings: opts,
    runs: byPolicy,
    table,
  };
}
