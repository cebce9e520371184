import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Command } from 'ioredis';
import { type ChatState, streamIdAfter } from '../src/loadtest/chat-state.js';
import { parseLoadtestArgs } from '../src/loadtest/options.js';
import { progressPrinter } from '../src/loadtest/progress.js';
import { renderSummary } from '../src/loadtest/report.js';
import { runLoadtest } from '../src/loadtest/run.js';
import { loadConfig } from '../src/shared/config.js';
import { chatKeys } from '../src/shared/keys.js';
import { closeRedis, createRedisClient, type RedisClient } from '../src/shared/redis.js';
import { type RoleProcess, startRole } from '../test/helpers/processes.js';
import { startCluster } from './chaos/cluster.js';
import { diagnoseFailures } from './chaos/diagnose.js';
import { linkedReplicas, SENTINEL_MASTER_NAME, startSentinels } from './chaos/sentinel.js';

/**
 * `npm run failover [-- --short] [--mode sentinel|cluster|both] [--acks 1,0]`: the failover
 * of a replicated Redis under load, real processes only. Per mode and REDIS_REPLICA_ACKS
 * value, a fresh deployment:
 *   sentinel: a primary, one replica, three sentinels (down-after 1 s, failover-timeout 3 s);
 *   cluster:  three masters with one replica each (cluster-node-timeout 2 s);
 * the mock model, an ingress, two workers and a compactor under `chatlane loadtest` (signed
 * webhooks in, signed replies out). Mid-run the replica that will be promoted falls behind
 * for --lag ms (the window Redis documents), then the primary (one master) is SIGKILLed; the
 * sentinels (the cluster) promote the replica, and the killed server comes back as its
 * replica. Sentinel: a proxy in front of the primary drops what it sends the replica
 * (scripts/chaos/lag-proxy.ts). Cluster: the replica is SIGSTOPped, which the kernel's socket
 * buffer makes no lag at all at these rates (it receives on while stopped) — so the Cluster
 * rows show the failover itself, not the replication window.
 * With REDIS_REPLICA_ACKS >= 1 it fails unless: 0 acknowledged messages lost, every
 * acknowledged message answered by the turn that committed it (not failed with the notice), none
 * committed twice, none out of order, no per-chat overlap at the model, no 5xx answer
 * but 503 (a Cluster redirect once came back as 500), every process still running. With 0
 * it reports how many acknowledged messages the failover lost.
 */

const { values: flags } = parseArgs({
  options: {
    short: { type: 'boolean', default: false },
    mode: { type: 'string', default: 'both' },
    acks: { type: 'string', default: '1,0' },
    lag: { type: 'string' },
    chats: { type: 'string' },
    rate: { type: 'string' },
    duration: { type: 'string' },
    seed: { type: 'string', default: '1' },
    out: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});

if (flags.help) {
  process.stdout.write(`usage: npm run failover -- [--short] [options]
  --short            the CI variant: REDIS_REPLICA_ACKS=1 only, 12 s of load per mode
  --mode <m>         sentinel, cluster or both (default both)
  --acks <list>      REDIS_REPLICA_ACKS values to run, e.g. 1,0 (default 1,0; short: 1)
  --lag <ms>         the promoted replica stops reading replication this long before the kill (default 1500)
  --chats <n>        chats (default 300, short 100)
  --rate <msgs/s>    arrival rate (default 40, short 30)
  --duration <s>     seconds of load (default 60, short 12); the kill comes at 40 %
  --seed <n>         the load test's schedule (default 1)
  --out <file>       write the JSON result
`);
  process.exit(0);
}

const short = flags.short === true;
const modes = flags.mode === 'both' ? ['sentinel', 'cluster'] : [flags.mode!];
const acksList = (flags.acks === '1,0' && short ? '1' : flags.acks!).split(',').map(Number);
const settings = {
  lagMs: Number(flags.lag ?? 1500),
  chats: Number(flags.chats ?? (short ? 100 : 300)),
  rate: Number(flags.rate ?? (short ? 30 : 40)),
  durationS: Number(flags.duration ?? (short ? 12 : 60)),
  seed: Number(flags.seed),
};
if (
  modes.some((m) => m !== 'sentinel' && m !== 'cluster') ||
  acksList.some((a) => !Number.isInteger(a) || a < 0) ||
  Object.values(settings).some((v) => !Number.isFinite(v) || v < 0)
) {
  process.stderr.write('failover: bad arguments (see --help)\n');
  process.exit(2);
}

const say = (line: string) =>
  process.stderr.write(`[failover ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PREFIX = 'failover';
const dir = mkdtempSync(join(tmpdir(), 'chatlane-failover-'));

/** A replicated Redis the run can fail over. */
interface Topology {
  what: string;
  env: Record<string, string>;
  /** The replica that will be promoted stops (SIGSTOP) / resumes reading replication. */
  pauseReplica(): void;
  resumeReplica(): void;
  killPrimary(): Promise<void>;
  /** Resolves when the replica serves as the primary. */
  promoted(): Promise<void>;
  restartOldPrimary(): Promise<void>;
  /** Replicas of the new primary past their initial sync. */
  newPrimaryReplicas(): Promise<number>;
  stop(): Promise<void>;
  pids(): number[];
  /** Did the failover take this chat's primary away? (On a Cluster: only the killed master's slots.) */
  affected(chatKey: string): boolean;
}

const signal = (pid: number | undefined, sig: NodeJS.Signals) => {
  if (pid) process.kill(pid, sig);
};

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

async function sentinelTopology(at: string): Promise<Topology> {
  const s = await startSentinels(at, { downAfterMs: 1000, failoverTimeoutMs: 3000, lag: true });
  return {
    what: `Sentinel: primary ${s.primary.port} (behind a lag proxy), replica ${s.replica.port}, sentinels ${s.sentinelList}`,
    env: { REDIS_SENTINELS: s.sentinelList, REDIS_SENTINEL_NAME: SENTINEL_MASTER_NAME },
    pauseReplica: () => s.proxy!.stall(),
    resumeReplica: () => undefined,
    killPrimary: async () => {
      await s.primary.stop('SIGKILL');
      // What the primary sent but the replica never got dies with it.
      s.proxy!.cut();
    },
    promoted: () => until(async () => (await s.masterPort()) === s.replica.port, 60_000, 'the promotion'),
    restartOldPrimary: () => s.primary.start(),
    newPrimaryReplicas: () => linkedReplicas(s.replica.port),
    stop: async () => {
      signal(s.replica.pid(), 'SIGCONT');
      await s.stop('SIGKILL');
    },
    pids: s.pids,
    affected: () => true,
  };
}

async function clusterTopology(at: string): Promise<Topology> {
  const c = await startCluster(at, { nodeTimeoutMs: 2000 });
  // The nodes agree on the layout a moment after the start script returns (cluster_state:ok,
  // replicas linked): wait for it rather than read it once.
  let shard: { master: number; replica?: number | undefined } | undefined;
  try {
    await until(
      async () => {
        shard = (await c.shards()).find((s) => s.replica !== undefined);
        return shard !== undefined;
      },
      15_000,
      'a cluster master with a replica',
    );
  } catch (err) {
    await c.stop();
    throw err;
  }
  if (!shard?.replica) throw new Error('the cluster has no master with a replica');
  const { master, replica } = shard as { master: number; replica: number };
  const other = c.ports.find((p) => p !== master && p !== replica)!;
  const slots = await c.slotsOf(master);
  const chatSlot = (chatKey: string) =>
    new Command('exists', [chatKeys(PREFIX, chatKey).meta]).getSlot() ?? -1;
  return {
    what: `Cluster ${c.nodes} (killing master ${master}, replica ${replica})`,
    env: { REDIS_CLUSTER_NODES: c.nodes },
    pauseReplica: () => signal(c.pid(replica), 'SIGSTOP'),
    resumeReplica: () => signal(c.pid(replica), 'SIGCONT'),
    killPrimary: async () => {
      const pid = c.pid(master);
      signal(pid, 'SIGKILL');
      await until(async () => !alive(pid), 10_000, 'the master to exit');
    },
    promoted: () => until(() => c.isServingMaster(replica, other), 60_000, 'the promotion'),
    restartOldPrimary: () => c.restart(master),
    newPrimaryReplicas: () => linkedReplicas(replica),
    stop: async () => {
      signal(c.pid(replica), 'SIGCONT');
      await c.stop();
    },
    pids: () => c.ports.flatMap((p) => c.pid(p) ?? []),
    affected: (chatKey) => {
      const slot = chatSlot(chatKey);
      return slots.some(([from, to]) => slot >= from && slot <= to);
    },
  };
}

function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface Scenario {
  mode: string;
  acks: number;
  ok: boolean;
  acked: number;
  lost: number;
  pendingAtEnd: number;
  committedTwice: number;
  outOfOrder: number;
  overlaps: number | string;
  undelivered: number | string;
  withdrawn: number;
  /**
   * Messages whose only replies were lost with the old primary: the person got no answer.
   * In the verdict since 0 showed in the nine runs after commit.lua's own check (1–2 in some
   * Sentinel runs with the client-side checks alone; docs/production-redis.md, the Commit row).
   */
  onlyReplyLost: number;
  answeredTwice: number;
  /** Chats whose last message has no reply from the turn that committed it (a failure notice is none). */
  unanswered: number;
  /**
   * Acknowledged messages with no reply from the turn that committed them, the last or not:
   * a turn that committed on the new primary an answer lost with the old one shows here.
   */
  withoutReply: number;
  /** 5xx answers other than 503: a failover is "retry later", never an internal error. */
  serverErrors: number;
  processesRunning: string;
  promotionS: number | null;
  firstAnswerAfterPromotionS: number | null;
  /** How long the drain took and what ended it. */
  drain: string;
  loadtestOk: boolean;
  /** The load test's failed checks and the chats they name (diagnose.ts; printed after the table). */
  diagnosis: string[];
}

const procs = new Set<RoleProcess>();
let topology: Topology | undefined;
process.on('exit', () => {
  for (const p of procs) signal(p.pid, 'SIGKILL');
  for (const pid of topology?.pids() ?? []) {
    try {
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
  rmSync(dir, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));

async function undeliveredReplies(
  redis: RedisClient,
  chats: Array<Pick<ChatState, 'key' | 'outbox' | 'deliveries' | 'messages'>>,
): Promise<{ undelivered: number; withdrawn: number; onlyReplyLost: string[] }> {
  let undelivered = 0;
  let withdrawn = 0;
  const onlyReplyLost: string[] = [];
  for (const chat of chats) {
    const lost = new Set<string>();
    for (const id of chat.outbox.keys()) {
      if (chat.deliveries.has(id)) continue;
      const still = await redis.xrange(chatKeys(PREFIX, chat.key).outbox, id, id);
      if (still.length > 0) undelivered++;
      else lost.add(id);
    }
    withdrawn += lost.size;
    onlyReplyLost.push(...answeredOnlyByLost(chat, lost));
  }
  return { undelivered, withdrawn, onlyReplyLost };
}

/**
 * Acknowledged messages whose every reply the load test saw was lost with the old primary:
 * the person got no answer, though the turn that wrote it may have committed (on the new
 * primary) and the load test's own checks count the lost item as the reply. A reply answers
 * the messages whose text it contains (the mock model echoes them; the texts are random).
 */
function answeredOnlyByLost(
  chat: Pick<ChatState, 'key' | 'outbox' | 'messages'>,
  lost: Set<string>,
): string[] {
  if (lost.size === 0) return [];
  const items = [...chat.outbox.values()];
  const found: string[] = [];
  for (const m of chat.messages) {
    if ((m.outcome !== 'accepted' && m.outcome !== 'duplicate') || !m.text) continue;
    const replies = items.filter((i) => i.text.includes(m.text));
    if (replies.length > 0 && replies.every((i) => lost.has(i.id))) {
      // In the diagnosis's example form, `<key>/<id>: …`, so that it reads this chat out.
      found.push(`${chat.key}/${m.id}: every reply lost (${replies.map((i) => i.id).join(', ')})`);
    }
  }
  return found;
}

/**
 * The drain's end as the deployment sees it: every chat's inbox is empty (each acknowledged
 * message that still exists is committed or failed) and its delivery cursor has passed its
 * newest outbox item (every reply still there was delivered). The load test's own view waits
 * for every reply it *saw* to be delivered, and one seen on the old primary and lost with it
 * never is: without this the drain runs to its timeout. A message lost with the old primary
 * ends the drain too, as it should: it will never be answered, and `lost` counts it after.
 */
async function deploymentSettled(
  redis: ReturnType<typeof createRedisClient>,
  chats: readonly Pick<ChatState, 'key' | 'acked'>[],
): Promise<boolean> {
  for (const chat of chats) {
    if (chat.acked === 0) continue;
    const k = chatKeys(PREFIX, chat.key);
    if ((await redis.xlen(k.inbox)) > 0) return false;
    const newest = await redis.xrevrange(k.outbox, '+', '-', 'COUNT', 1);
    const newestId = newest[0]?.[0];
    if (newestId === undefined) continue;
    const deliveredTo = await redis.hget(k.meta, 'deliveredTo');
    if (deliveredTo === null || streamIdAfter(newestId, deliveredTo)) return false;
  }
  return true;
}

async function scenario(mode: string, acks: number): Promise<Scenario> {
  const at = join(dir, `${mode}-${acks}`);
  mkdirSync(at, { recursive: true });
  topology = mode === 'sentinel' ? await sentinelTopology(at) : await clusterTopology(at);
  const topo = topology;
  say(`${mode}, REDIS_REPLICA_ACKS=${acks}: ${topo.what}`);
  const started = new Set<RoleProcess>();
  const start = async (
    role: 'ingress' | 'worker' | 'compactor' | 'mock-llm',
    env: Record<string, string>,
  ) => {
    const p = await startRole(role, env, { timeoutMs: 60_000 });
    procs.add(p);
    started.add(p);
    return p;
  };
  let reader: RedisClient | undefined;
  try {
    const mock = await start('mock-llm', { MOCK_LLM_PORT: '0', MOCK_LLM_LATENCY_MS: '50-200' });
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const env: Record<string, string> = {
      ...topo.env,
      REDIS_REPLICA_ACKS: String(acks),
      GENERIC_WEBHOOK_SOURCES: 'loadtest',
      GENERIC_WEBHOOK_SECRETS_LOADTEST: secret,
      GENERIC_WEBHOOK_REPLY_HOSTS: '127.0.0.1',
      GENERIC_WEBHOOK_REPLY_ALLOW_HTTP: 'true',
      CHATLANE_PREFIX: PREFIX,
      LLM_BASE_URL: mock.url!,
      LLM_MODEL: 'mock',
      MAX_INPUT_TOKENS: '1500',
      // A job or trigger lost with the old primary is found again within seconds.
      SWEEP_INTERVAL_MS: '5000',
    };
    const ingress = await start('ingress', env);
    await start('worker', env);
    await start('worker', env);
    await start('compactor', env);

    const opts = parseLoadtestArgs([
      ...['--url', ingress.url!, '--mock-url', mock.url!, '--via', 'webhook', '--webhook-secret', secret],
      ...['--chats', String(settings.chats), '--messages', '8', '--rate', String(settings.rate)],
      ...['--duration', String(settings.durationS), '--seed', String(settings.seed), '--text-bytes', '120'],
      // The drain ends when the deployment has settled (deploymentSettled), or at this cap.
      ...['--drain', acks > 0 ? '90' : '30', '--retries', '20', '--poll-interval', '200'],
    ]);
    if (opts === 'help') throw new Error('unreachable');

    let killedAt = 0;
    let promotedAt = 0;
    let faultOver = false;
    const fault = (async () => {
      await sleep(settings.durationS * 400);
      if (settings.lagMs > 0) {
        topo.pauseReplica();
        say(`replica paused (SIGSTOP) for ${settings.lagMs} ms`);
        await sleep(settings.lagMs);
      }
      await topo.killPrimary();
      killedAt = Date.now();
      topo.resumeReplica();
      say('primary SIGKILLed, replica resumed');
      await topo.promoted();
      promotedAt = Date.now();
      say(`replica promoted after ${((promotedAt - killedAt) / 1000).toFixed(1)} s`);
      await topo.restartOldPrimary();
      say('old primary restarted as a replica');
      await until(async () => (await topo.newPrimaryReplicas()) >= 1, 60_000, 'the old primary to sync');
      say(
        `the new primary has a replica again, ${((Date.now() - promotedAt) / 1000).toFixed(1)} s after the promotion`,
      );
    })().finally(() => {
      faultOver = true;
    });
    const printer = progressPrinter('plain');
    // Reads the deployment during the drain (settled) and after it (lost replies, diagnosis).
    const probe = createRedisClient(loadConfig({ ...topo.env, CHATLANE_PREFIX: PREFIX }), 'worker');
    probe.on('error', () => undefined);
    reader = probe;
    let settledSeen = false;
    const result = await runLoadtest(opts, {
      ...(printer && { onProgress: printer }),
      progressIntervalMs: 2000,
      // Read only once the old primary is gone for good and its successor has a replica.
      settled: async (chats) => {
        settledSeen ||= faultOver && (await deploymentSettled(probe, chats));
        return settledSeen;
      },
    });
    await fault;
    const { drainS, drainTimedOut } = result.report.timing;
    const drainEnd = drainTimedOut ? 'timed out' : settledSeen ? 'settled' : 'answered';
    say(`drain ${drainS} s: ${drainEnd}`);
    const rep = result.report;
    process.stdout.write(`${renderSummary(rep)}\n\n`);
    const running = [...started].filter((p) => p.child.exitCode === null && p.child.signalCode === null);
    // The first answer of a chat the failover took its primary from.
    const firstCommit = result.chats
      .filter((c) => topo.affected(c.key))
      .flatMap((c) => c.commits.map((x) => x.ts))
      .filter((ts) => ts >= promotedAt)
      .reduce((a, b) => Math.min(a, b), Infinity);
    // An outbox item the load test saw but that is gone from the outbox now was written on the
    // old primary and lost with it — never confirmed, so never delivered (its turn ran again
    // and answered). Only an item still there and never delivered is a failure.
    const { undelivered, withdrawn, onlyReplyLost } = await undeliveredReplies(probe, result.chats);
    const s: Scenario = {
      mode,
      acks,
      ok: false,
      acked: rep.messages.acked,
      lost: rep.messages.lost,
      pendingAtEnd: rep.messages.pendingAtEnd,
      committedTwice: rep.messages.committedTwice,
      outOfOrder: rep.messages.outOfOrder,
      overlaps: rep.model?.overlaps ?? 'no data',
      undelivered: rep.deliveries ? undelivered : 'no data',
      withdrawn,
      onlyReplyLost: onlyReplyLost.length,
      answeredTwice: rep.duplicates.answeredTwice,
      unanswered: rep.invariants.find((i) => i.name === 'answered')?.violations ?? 0,
      withoutReply: rep.messages.acked - rep.messages.answered,
      serverErrors: Object.entries(rep.errors.sendsByStatus)
        .filter(([status]) => Number(status) >= 500 && status !== '503')
        .reduce((sum, [, n]) => sum + n, 0),
      processesRunning: `${running.length} of ${started.size}`,
      promotionS: promotedAt ? Math.round((promotedAt - killedAt) / 100) / 10 : null,
      firstAnswerAfterPromotionS: Number.isFinite(firstCommit)
        ? Math.round((firstCommit - promotedAt) / 100) / 10
        : null,
      drain: `${drainS}s ${drainEnd}`,
      loadtestOk: rep.ok,
      diagnosis: [],
    };
    s.ok =
      acks === 0 ||
      (s.lost === 0 &&
        s.pendingAtEnd === 0 &&
        s.committedTwice === 0 &&
        s.outOfOrder === 0 &&
        s.overlaps === 0 &&
        s.undelivered === 0 &&
        s.serverErrors === 0 &&
        s.unanswered === 0 &&
        s.withoutReply === 0 &&
        s.onlyReplyLost === 0 &&
        running.length === started.size &&
        s.firstAnswerAfterPromotionS !== null);
    if (!s.ok) {
      const lostCheck = {
        name: 'every reply lost with the old primary',
        ok: onlyReplyLost.length === 0,
        violations: onlyReplyLost.length,
        examples: onlyReplyLost,
      };
      s.diagnosis = await diagnoseFailures(probe, PREFIX, [...rep.invariants, lostCheck], result.chats);
      // What each process said last: why a failing run failed.
      for (const p of started) {
        const tail = p.logs.slice(-15).map((l) => JSON.stringify(l));
        process.stderr.write(`--- pid ${p.pid}, last log lines:\n${tail.join('\n')}\n`);
      }
    }
    return s;
  } finally {
    if (reader) await closeRedis(reader);
    await Promise.allSettled([...started].map((p) => p.kill('SIGKILL')));
    for (const p of started) procs.delete(p);
    await topo.stop();
    topology = undefined;
  }
}

const results: Scenario[] = [];
let failed = false;
try {
  for (const mode of modes) {
    for (const acks of acksList) results.push(await scenario(mode, acks));
  }
} catch (err) {
  say(`failed: ${(err as Error).stack ?? String(err)}`);
  failed = true;
}

const rows: Array<[string, (s: Scenario) => string | number | null]> = [
  ['acknowledged messages', (s) => s.acked],
  ['lost (acknowledged, not in history)', (s) => s.lost],
  ['still pending at the end', (s) => s.pendingAtEnd],
  ['committed twice', (s) => s.committedTwice],
  ['out of order', (s) => s.outOfOrder],
  ['per-chat overlaps at the model', (s) => s.overlaps],
  ['replies never delivered (still in the outbox)', (s) => s.undelivered],
  ['replies lost with the old primary, never delivered', (s) => s.withdrawn],
  ['messages whose every reply was lost that way', (s) => s.onlyReplyLost],
  // An item lost with the old primary was seen, never delivered: its turn answered again.
  ['messages answered twice (lost replies included)', (s) => s.answeredTwice],
  ['chats whose last message got no reply', (s) => s.unanswered],
  ['messages with no reply from their turn', (s) => s.withoutReply],
  ['answers 5xx other than 503 (retry later)', (s) => s.serverErrors],
  ['processes still running', (s) => s.processesRunning],
  ['kill → promotion (s)', (s) => s.promotionS],
  ['promotion → first answer in a failed-over chat (s)', (s) => s.firstAnswerAfterPromotionS],
  ['drain (ended when)', (s) => s.drain],
  ['verdict', (s) => (s.acks === 0 ? 'reported' : s.ok ? 'PASS' : 'FAIL')],
];
const header = results.map((s) => `${s.mode} acks=${s.acks}`);
const width = Math.max(...rows.map(([r]) => r.length));
const lines = [
  `failover run: lag ${settings.lagMs} ms, ${settings.chats} chats at ${settings.rate} msg/s for ${settings.durationS} s`,
  `  ${''.padEnd(width)}  ${header.map((h) => h.padStart(16)).join('')}`,
  ...rows.map(([r, f]) => `  ${r.padEnd(width)}  ${results.map((s) => String(f(s)).padStart(16)).join('')}`),
];
// Last, where a truncated log still shows them: what the load test found in a failed run.
for (const s of results.filter((r) => !r.ok && r.acks > 0)) {
  lines.push(`  ${s.mode} acks=${s.acks} failed:`, ...s.diagnosis.map((l) => `    ${l}`));
}
const ok = !failed && results.length === modes.length * acksList.length && results.every((s) => s.ok);
lines.push(ok ? 'FAILOVER PASS' : 'FAILOVER FAIL');
process.stdout.write(`${lines.join('\n')}\n`);
if (flags.out) writeFileSync(flags.out, `${JSON.stringify({ settings, results }, null, 2)}\n`);
process.stdout.write('', () => process.exit(ok ? 0 : 1));
