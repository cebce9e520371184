import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../bench/lib/util.js';
import { parseLoadtestArgs } from '../src/loadtest/options.js';
import { progressPrinter } from '../src/loadtest/progress.js';
import { seededRandom } from '../src/loadtest/random.js';
import { renderSummary } from '../src/loadtest/report.js';
import { runLoadtest } from '../src/loadtest/run.js';
import { type RoleProcess, startRole } from '../test/helpers/processes.js';
import { diagnoseFailures } from './chaos/diagnose.js';
import { type Kill, recoveryAfterKills } from './chaos/recovery.js';
import { ask, ownRedis } from './chaos/redis-server.js';

/**
 * `npm run chaos [-- --short]`: one machine, real processes. Its own redis-server (AOF,
 * fsync on every write) on a spare port, the mock model, an ingress, 3 workers and a
 * compactor (`dist/cli.js`); `chatlane loadtest` drives them while a random worker is
 * SIGKILLed every few seconds (and restarted after a pause) and Redis is killed and restarted
 * once. Then a table of what must be zero, and the time to recover after each kill.
 * Exits 1 when a must-be-zero row is not zero or the load test's checks failed.
 */

const { values: flags } = parseArgs({
  options: {
    short: { type: 'boolean', default: false },
    workers: { type: 'string', default: '3' },
    chats: { type: 'string' },
    messages: { type: 'string' },
    rate: { type: 'string' },
    duration: { type: 'string' },
    'kill-every': { type: 'string' },
    pause: { type: 'string' },
    seed: { type: 'string', default: '1' },
    debounce: { type: 'string', default: '0' },
    'lane-policy': { type: 'string', default: 'merge' },
    out: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});

if (flags.help) {
  process.stdout.write(`usage: npm run chaos -- [--short] [options]
  --short            the CI variant: under 2 minutes, sweeps every 5 s
  --workers <n>      worker processes (default 3)
  --chats <n>        chats (default: 1000, short: 150)
  --messages <n>     messages per chat (default: 15, short: 10)
  --rate <msgs/s>    open-model arrival rate (default: 50, short: 35)
  --duration <s>     seconds of load (default: 300, short: 45)
  --kill-every <s>   SIGKILL a random worker this often (default: 10, short: 7)
  --pause <s>        restart a killed worker after this pause (default: 3, short: 2)
  --seed <n>         schedule and victim choice (default 1)
  --debounce <ms>    LANE_DEBOUNCE_MS of every process (default 0: off; docs/lane-policies.md)
  --lane-policy <p>  LANE_POLICY: merge (default) or interrupt
  --out <file>       write the JSON result (table, kills, the load test's report)
`);
  process.exit(0);
}

const short = flags.short === true;
const num = (raw: string | undefined, fallback: number) => (raw === undefined ? fallback : Number(raw));
const settings = {
  workers: num(flags.workers, 3),
  chats: num(flags.chats, short ? 150 : 1000),
  messages: num(flags.messages, short ? 10 : 15),
  rate: num(flags.rate, short ? 35 : 50),
  durationS: num(flags.duration, short ? 45 : 300),
  killEveryS: num(flags['kill-every'], short ? 7 : 10),
  pauseS: num(flags.pause, short ? 2 : 3),
  seed: num(flags.seed, 1),
};
for (const [k, v] of Object.entries(settings)) {
  if (!Number.isFinite(v) || v <= 0) {
    process.stderr.write(`chaos: --${k} must be a positive number\n`);
    process.exit(2);
  }
}
// Lane policies (docs/lane-policies.md): a debounced run must lose and double nothing too.
const lane = { debounceMs: Number(flags.debounce), policy: flags['lane-policy'] };
if (!Number.isSafeInteger(lane.debounceMs) || lane.debounceMs < 0) {
  process.stderr.write('chaos: --debounce must be a whole number of ms, 0 or more\n');
  process.exit(2);
}
if (lane.policy !== 'merge' && lane.policy !== 'interrupt') {
  process.stderr.write('chaos: --lane-policy must be merge or interrupt\n');
  process.exit(2);
}

// Leases, job locks and stall checks keep the defaults users get, so the recovery times are
// theirs. The short run only sweeps more often: a trigger lost to the Redis restart is then
// found within its drain rather than after the default 30 s.
const timings: Record<string, string> = {
  ...(short && { SWEEP_INTERVAL_MS: '5000' }),
  ...(lane.debounceMs > 0 && { LANE_DEBOUNCE_MS: String(lane.debounceMs) }),
  ...(lane.policy === 'interrupt' && { LANE_POLICY: 'interrupt' }),
};

const say = (line: string) =>
  process.stderr.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const started = Date.now();
const dir = mkdtempSync(join(tmpdir(), 'chatlane-chaos-'));
const procs = new Set<RoleProcess>();
const redis = ownRedis(dir, await freePort());

/** Every process this run started, stopped by pid; the Redis directory removed. Idempotent. */
let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await Promise.allSettled([...procs].map((p) => p.kill('SIGKILL')));
  await redis.stop('SIGKILL').catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
}
// Last resort if something exits the process under us: signal by pid, synchronously.
process.on('exit', () => {
  if (cleaned) return;
  for (const p of procs) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {}
  }
  const pid = redis.pid();
  if (pid) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
  rmSync(dir, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    say(`${signal}: stopping every process of this run`);
    void cleanup().finally(() => process.exit(130));
  });
}

async function start(role: 'ingress' | 'worker' | 'compactor' | 'mock-llm', env: Record<string, string>) {
  const proc = await startRole(role, env, { timeoutMs: 60_000 });
  procs.add(proc);
  return proc;
}

const perThousand = (n: number, of: number) => (of > 0 ? ((n * 1000) / of).toFixed(1) : '-');

interface ChaosRow {
  row: string;
  value: number | string;
  mustBeZero: boolean;
}

async function main(): Promise<number> {
  await redis.start();
  say(`redis-server on ${redis.url} (AOF, appendfsync always) in ${dir}`);
  const mock = await start('mock-llm', { MOCK_LLM_PORT: '0', MOCK_LLM_LATENCY_MS: '50-200' });
  // Messages go in as signed generic webhooks and replies come back to the load test's own
  // receiver, so duplicate deliveries are counted where a user would see them.
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const env: Record<string, string> = {
    GENERIC_WEBHOOK_SOURCES: 'loadtest',
    GENERIC_WEBHOOK_SECRETS_LOADTEST: secret,
    GENERIC_WEBHOOK_REPLY_HOSTS: '127.0.0.1',
    GENERIC_WEBHOOK_REPLY_ALLOW_HTTP: 'true',
    REDIS_URL: redis.url,
    CHATLANE_PREFIX: 'chaos',
    LLM_BASE_URL: mock.url!,
    LLM_MODEL: 'mock',
    // Small enough that long chats compact while the run goes on.
    MAX_INPUT_TOKENS: '1500',
    ...timings,
  };
  const ingress = await start('ingress', env);
  const workers: RoleProcess[] = [];
  for (let i = 0; i < settings.workers; i++) workers.push(await start('worker', env));
  await start('compactor', env);
  say(`mock ${mock.url}, ingress ${ingress.url}, ${workers.length} workers, a compactor`);

  const opts = parseLoadtestArgs([
    '--url',
    ingress.url!,
    '--mock-url',
    mock.url!,
    '--via',
    'webhook',
    '--webhook-secret',
    secret,
    '--chats',
    String(settings.chats),
    '--messages',
    String(settings.messages),
    '--rate',
    String(settings.rate),
    '--duration',
    String(settings.durationS),
    '--drain',
    '120',
    '--seed',
    String(settings.seed),
    '--text-bytes',
    '120',
    // Redis restarts: the ingress answers 503 meanwhile, the client retries with the same id.
    '--retries',
    '12',
    '--poll-interval',
    '200',
  ]);
  if (opts === 'help') throw new Error('unreachable');

  const random = seededRandom(settings.seed ^ 0x9e3779b9);
  const kills: Kill[] = [];
  let redisRestart: { downAt: number; upAt: number } | undefined;
  const loadDone = new AbortController();

  const restarts: Promise<void>[] = [];
  const chaos = (async () => {
    const redisAt = Date.now() + (settings.durationS * 1000) / 2;
    const until = Date.now() + settings.durationS * 1000 - 2000;
    let nextKill = Date.now() + settings.killEveryS * 1000;
    while (Date.now() < until && !loadDone.signal.aborted) {
      await sleep(200);
      if (!redisRestart && Date.now() >= redisAt) {
        const downAt = Date.now();
        say('SIGKILL redis-server, restarting it on the same port');
        await redis.stop('SIGKILL');
        await redis.start();
        redisRestart = { downAt, upAt: Date.now() };
        say(`redis-server back after ${((redisRestart.upAt - downAt) / 1000).toFixed(1)} s`);
      }
      if (Date.now() >= nextKill && workers.length > 0) {
        nextKill = Date.now() + settings.killEveryS * 1000;
        const victim = workers.splice(random.int(0, workers.length - 1), 1)[0]!;
        kills.push({ pid: victim.pid, at: Date.now() });
        await victim.kill('SIGKILL');
        procs.delete(victim);
        say(`SIGKILL worker pid ${victim.pid}; restarting in ${settings.pauseS} s`);
        restarts.push(
          sleep(settings.pauseS * 1000).then(async () => {
            const next = await start('worker', env);
            workers.push(next);
            say(`worker pid ${next.pid} started`);
          }),
        );
      }
    }
  })();

  const printer = progressPrinter('plain');
  const result = await runLoadtest(opts, {
    ...(printer && { onProgress: printer }),
    progressIntervalMs: 1000,
  });
  loadDone.abort();
  await chaos;
  await Promise.all(restarts);
  const rep = result.report;
  process.stdout.write(`${renderSummary(rep)}\n\n`);

  const recovery = recoveryAfterKills(kills, result.chats, hostname(), Date.parse(rep.startedAt));
  const dup = rep.duplicates;
  const undelivered = rep.invariants.find((i) => i.name === 'delivered')?.violations ?? 0;
  const rows: ChaosRow[] = [
    { row: 'acknowledged messages', value: rep.messages.acked, mustBeZero: false },
    { row: 'lost', value: rep.messages.lost, mustBeZero: true },
    { row: 'still pending at the end', value: rep.messages.pendingAtEnd, mustBeZero: true },
    { row: 'committed twice', value: rep.messages.committedTwice, mustBeZero: true },
    { row: 'out of order', value: rep.messages.outOfOrder, mustBeZero: true },
    { row: 'per-chat overlaps at the model', value: rep.model?.overlaps ?? 'no data', mustBeZero: true },
    { row: 'replies never delivered', value: rep.deliveries ? undelivered : 'no data', mustBeZero: true },
    {
      row: 'duplicate deliveries (same reply id delivered again)',
      value: dup.redeliveries,
      mustBeZero: false,
    },
    {
      row: 'replies of turns that never committed',
      value: dup.uncommittedReplies,
      mustBeZero: false,
    },
    {
      row: 'messages answered twice (a retried turn answering again)',
      value: `${dup.answeredTwice} (${perThousand(dup.answeredTwice, rep.messages.acked)} per 1,000)`,
      mustBeZero: false,
    },
  ];
  for (const [i, k] of recovery.entries()) {
    rows.push({
      row: `recovery after kill ${i + 1} (pid ${k.pid}, ${k.waitingChats} of ${k.heldChats} held chats waiting)`,
      value:
        k.waitingChats === 0
          ? 'nothing waiting'
          : `taken over ${k.takenOverAfterS} s, answered ${k.recoveredAfterS === null ? 'NEVER' : `${k.recoveredAfterS} s`}`,
      mustBeZero: false,
    });
  }
  const width = Math.max(...rows.map((r) => r.row.length));
  const bad = rows.filter((r) => r.mustBeZero && r.value !== 0);
  const unrecovered = recovery.filter((k) => k.recoveredAfterS === null);
  const wallS = Math.round((Date.now() - started) / 1000);
  const lines = [
    `chaos run: ${settings.workers} workers + compactor, ${kills.length} worker kills (SIGKILL, restarted after ${settings.pauseS} s), ` +
      `lanes: ${lane.policy}${lane.debounceMs > 0 ? `, debounce ${lane.debounceMs} ms` : ''}, ` +
      `Redis SIGKILLed and restarted ${redisRestart ? `once (down ${((redisRestart.upAt - redisRestart.downAt) / 1000).toFixed(1)} s)` : 'never (run too short)'}, ${wallS} s wall time`,
    ...rows.map(
      (r) =>
        `  ${r.row.padEnd(width)}  ${String(r.value).padStart(30)}${r.mustBeZero ? (r.value === 0 ? '   ok (must be 0)' : '   FAIL (must be 0)') : ''}`,
    ),
  ];
  if (dup.redeliveredIds.length > 0)
    lines.push(`  redelivered (chat/id×times): ${dup.redeliveredIds.join(' ')}`);
  if (dup.answeredTwiceIds.length > 0)
    lines.push(`  answered twice (chat/message): ${dup.answeredTwiceIds.join(' ')}`);
  if (dup.uncommittedReplyIds.length > 0) {
    lines.push(`  replies of turns that never committed (chat/id): ${dup.uncommittedReplyIds.join(' ')}`);
  }
  lines.push(
    "  (replies are at-least-once: counted at the load test's signed replyTo receiver, by chat and id)",
  );
  const ok = bad.length === 0 && unrecovered.length === 0 && rep.ok && redisRestart !== undefined;
  if (!rep.ok) {
    // Last, where a truncated CI log still shows them: what failed, and the chats it names.
    const diagnosis = (await ask(redis.port, (r) =>
      diagnoseFailures(r, 'chaos', rep.invariants, result.chats),
    )) ?? ['(Redis did not answer: no diagnosis)'];
    lines.push('  the load test failed:', ...diagnosis.map((l) => `    ${l}`));
  }
  lines.push(ok ? 'CHAOS PASS' : `CHAOS FAIL${rep.ok ? '' : ' (the load test failed its checks)'}`);
  process.stdout.write(`${lines.join('\n')}\n`);

  if (flags.out) {
    writeFileSync(
      flags.out,
      `${JSON.stringify({ settings, lane, timings, wallS, rows, kills: recovery, redisRestart, loadtest: rep }, null, 2)}\n`,
    );
  }
  return ok ? 0 : 1;
}

let code = 1;
try {
  code = await main();
} catch (err) {
  say(`failed: ${(err as Error).stack ?? String(err)}`);
} finally {
  await cleanup();
}
process.stdout.write('', () => process.exit(code));
