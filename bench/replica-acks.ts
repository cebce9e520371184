import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { type OwnRedis, ownRedis } from '../scripts/chaos/redis-server.js';
import { linkedReplicas } from '../scripts/chaos/sentinel.js';
import { loadConfig } from '../src/shared/config.js';
import { silentLogger } from '../src/shared/logger.js';
import { closeRedis, createRedis, waitReady } from '../src/shared/redis.js';
import { replicaAcks } from '../src/shared/replica-acks.js';
import { ChatStore } from '../src/shared/store/chat-store.js';
import { runTurn } from '../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../src/worker/turn/turn-deps.js';
import { echoModel } from './lib/echo-model.js';
import {
  freePort,
  median,
  medianOf,
  orderFor,
  percentile,
  progress,
  randomPrefix,
  round,
  spawnServer,
  userMessage,
} from './lib/util.js';

/**
 * What REDIS_REPLICA_ACKS=1 costs against 0, as ratios in one run: a primary and one replica
 * of its own (redis-server on free ports, AOF with appendfsync everysec, the usual production
 * setting), then per setting, alternating which goes first:
 *   ingress: POST /v1/chats/:chatKey/messages throughput of the real `chatlane ingress`
 *            (autocannon, as bench/ingress.ts), each 202 after WAIT 1 when on;
 *   turns:   one turn after another (production TurnDeps, zero-latency in-process model):
 *            time from the acquire to the released lease — the acquire's and the commit's
 *            WAIT when on.
 */

export interface ReplicaAcksOptions {
  runs: number;
  durationS: number;
  warmupS: number;
  connections: number;
  chats: number;
  /** Sequential turns timed per setting. */
  turns: number;
}

export const REPLICA_ACKS_DEFAULTS: ReplicaAcksOptions = {
  runs: 3,
  durationS: 8,
  warmupS: 2,
  connections: 50,
  chats: 1000,
  turns: 300,
};

type Acks = '0' | '1';

interface SideMeasurement {
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  turnP50Ms: number;
  turnP99Ms: number;
}

const TEXT = 'Hi, could you remind me what we decided about the deployment window for Friday?';

async function ingressLoad(url: string, opts: ReplicaAcksOptions, tag: string, durationS: number) {
  let n = 0;
  return autocannon({
    url,
    connections: opts.connections,
    duration: durationS,
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        setupRequest: (req) => {
          const i = n++;
          return {
            ...req,
            path: `/v1/chats/bench-chat-${i % opts.chats}/messages`,
            body: JSON.stringify({ id: `${tag}-${i}`, text: TEXT }),
          };
        },
      },
    ],
  });
}

async function measure(primary: OwnRedis, acks: Acks, opts: ReplicaAcksOptions, run: number) {
  const prefix = randomPrefix(`acks${acks}`);
  const env = {
    REDIS_URL: primary.url,
    CHATLANE_PREFIX: prefix,
    LOG_LEVEL: 'warn',
    REDIS_REPLICA_ACKS: acks,
  };
  const server = await spawnServer({
    name: 'chatlane ingress',
    args: ['--import', 'tsx', 'src/cli.ts', 'ingress'],
    env,
    readyPath: '/readyz',
  });
  let ingress: autocannon.Result;
  try {
    if (opts.warmupS > 0) await ingressLoad(server.url, opts, `${prefix}-w`, opts.warmupS);
    ingress = await ingressLoad(server.url, opts, `${prefix}-m`, opts.durationS);
  } finally {
    await server.stop();
  }

  // The turns' own prefix: the reply streams (built from the config) must fence on the store's keys.
  const config = loadConfig({
    ...env,
    CHATLANE_PREFIX: `${prefix}-t`,
    LLM_BASE_URL: 'http://127.0.0.1:9/v1',
    LLM_MODEL: 'bench-echo',
  });
  const connection = createRedis(primary.url, 'worker', 'chatlane:bench-acks');
  const times: number[] = [];
  try {
    await waitReady(connection, 10_000);
    const store = new ChatStore(connection, {
      prefix: config.CHATLANE_PREFIX,
      maxEvents: config.EVENTS_MAX_LEN,
      replicaAcks: replicaAcks(config),
    });
    const deps = { ...turnDepsFromConfig(config, store, silentLogger()), model: echoModel().model };
    const limits = { maxPending: 1000, dedupWindowMs: 60_000 };
    for (let i = 0; i < opts.turns; i++) {
      const chatKey = `bench-turn-${i}`;
      await store.ingest(chatKey, userMessage(chatKey, `m${i}`, TEXT), limits);
      const t0 = performance.now();
      const outcome = await runTurn(deps, chatKey);
      if (outcome.status !== 'done') throw new Error(`turn ${i}: ${outcome.status}`);
      times.push(performance.now() - t0);
    }
  } finally {
    await closeRedis(connection);
  }
  const m: SideMeasurement = {
    reqPerSec: round(ingress.requests.average, 1),
    p50Ms: ingress.latency.p50,
    p99Ms: ingress.latency.p99,
    non2xx: ingress.non2xx,
    turnP50Ms: round(median(times), 2),
    turnP99Ms: round(percentile(times, 99), 2),
  };
  progress(`replica-acks run ${run + 1}: REDIS_REPLICA_ACKS=${acks} ${JSON.stringify(m)}`);
  return m;
}

export async function benchReplicaAcks(opts: ReplicaAcksOptions) {
  const dir = mkdtempSync(join(tmpdir(), 'chatlane-bench-acks-'));
  const at = (name: string) => {
    const d = join(dir, name);
    mkdirSync(d);
    return d;
  };
  const everysec = ['--appendfsync', 'everysec', '--repl-diskless-sync-delay', '0'];
  const primary = ownRedis(at('primary'), await freePort(), { args: everysec });
  const replicaPort = await freePort();
  const replica = ownRedis(at('replica'), replicaPort, {
    args: [...everysec, '--replicaof', '127.0.0.1', String(primary.port)],
  });
  const runs: Array<{
    order: Acks[];
    off: SideMeasurement;
    on: SideMeasurement;
    ingressRatio: number;
    turnRatio: number;
  }> = [];
  try {
    await primary.start();
    await replica.start();
    for (let i = 0; (await linkedReplicas(primary.port)) < 1; i++) {
      if (i > 200) throw new Error('the replica did not sync');
      await new Promise((r) => setTimeout(r, 100));
    }
    for (let run = 0; run < opts.runs; run++) {
      const order = orderFor<Acks, Acks>(run, '0', '1');
      const m: Partial<Record<Acks, SideMeasurement>> = {};
      for (const acks of order) m[acks] = await measure(primary, acks, opts, run);
      const off = m['0']!;
      const on = m['1']!;
      runs.push({
        order,
        off,
        on,
        ingressRatio: round(on.reqPerSec / off.reqPerSec),
        turnRatio: round(on.turnP50Ms / off.turnP50Ms),
      });
    }
  } finally {
    await replica.stop('SIGKILL');
    await primary.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    description:
      `REDIS_REPLICA_ACKS=1 ÷ 0 on a primary + one replica (local, AOF everysec): ingress POST throughput over ` +
      `${opts.chats} chats, ${opts.connections} connections, ${opts.durationS}s after ${opts.warmupS}s warm-up; ` +
      `${opts.turns} sequential turns (zero-latency model), acquire to release`,
    settings: opts,
    runs,
    median: {
      offReqPerSec: medianOf(runs, (r) => r.off.reqPerSec),
      onReqPerSec: medianOf(runs, (r) => r.on.reqPerSec),
      offP50Ms: medianOf(runs, (r) => r.off.p50Ms),
      onP50Ms: medianOf(runs, (r) => r.on.p50Ms),
      offP99Ms: medianOf(runs, (r) => r.off.p99Ms),
      onP99Ms: medianOf(runs, (r) => r.on.p99Ms),
      onNon2xx: medianOf(runs, (r) => r.on.non2xx),
      offTurnP50Ms: medianOf(runs, (r) => r.off.turnP50Ms),
      onTurnP50Ms: medianOf(runs, (r) => r.on.turnP50Ms),
      offTurnP99Ms: medianOf(runs, (r) => r.off.turnP99Ms),
      onTurnP99Ms: medianOf(runs, (r) => r.on.turnP99Ms),
      /** on ÷ off req/s: 1 = free. */
      ingressRatio: medianOf(runs, (r) => r.ingressRatio),
      /** on ÷ off turn p50: 1 = free. */
      turnLatencyRatio: medianOf(runs, (r) => r.turnRatio),
    },
  };
}
