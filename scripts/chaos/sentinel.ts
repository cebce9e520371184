import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../bench/lib/util.js';
import { type LagProxy, lagProxy } from './lag-proxy.js';
import { ask, type OwnRedis, ownRedis } from './redis-server.js';

/**
 * A Sentinel deployment on spare ports, all real `redis-server` processes: a primary, one
 * replica (both AOF, fsync always) and three sentinels (quorum 2) with short timeouts, so a
 * killed primary is replaced within a few seconds. Used by the failover run and its test.
 */

export const SENTINEL_MASTER_NAME = 'chatlane';

// A replica's full sync starts at once instead of after Redis's default 5 s pause (which
// waits for more replicas to share one diskless transfer).
const FAST_SYNC = ['--repl-diskless-sync-delay', '0'];

export interface SentinelSetup {
  /** The data nodes by role at start; after a failover `primary` is the old one. */
  primary: OwnRedis;
  replica: OwnRedis;
  sentinels: OwnRedis[];
  /** With `lag`: the primary as everyone sees it (scripts/chaos/lag-proxy.ts). */
  proxy: LagProxy | undefined;
  /** REDIS_SENTINELS. */
  sentinelList: string;
  /** The master's port as the sentinels answer it now. */
  masterPort(): Promise<number | undefined>;
  /** Every server of the setup, by pid (idempotent). */
  stop(signal?: NodeJS.Signals): Promise<void>;
  pids(): number[];
}

export interface SentinelOptions {
  downAfterMs: number;
  failoverTimeoutMs: number;
  /**
   * Put the primary behind a lag proxy: the replica and the sentinels (so every client
   * too) reach it at 127.0.0.2 on its port, and the run can make the replica fall behind.
   */
  lag?: boolean;
}

export async function linkedReplicas(port: number): Promise<number> {
  const info = await ask(port, (r) => r.info('replication'));
  return (info ?? '').match(/^slave\d+:.*state=online/gm)?.length ?? 0;
}

export async function startSentinels(
  dir: string,
  opts: SentinelOptions = { downAfterMs: 1000, failoverTimeoutMs: 3000 },
): Promise<SentinelSetup> {
  const dirOf = (name: string) => {
    const d = join(dir, name);
    mkdirSync(d, { recursive: true });
    return d;
  };
  const primaryPort = await freePort();
  const replicaPort = await freePort();
  const primary = ownRedis(dirOf('primary'), primaryPort, {
    // Restarted after a failover it comes back as a replica of whoever is master then: on its
    // own AOF it would otherwise be a second master until the sentinels demote it.
    args: (n) => [...FAST_SYNC, ...(n === 0 ? [] : ['--replicaof', '127.0.0.1', String(replicaPort)])],
  });
  const proxy = opts.lag ? await lagProxy(primaryPort) : undefined;
  const primaryHost = proxy?.host ?? '127.0.0.1';
  const replica = ownRedis(dirOf('replica'), replicaPort, {
    args: [...FAST_SYNC, '--replicaof', primaryHost, String(primaryPort)],
  });
  const sentinels: OwnRedis[] = [];
  const all = () => [primary, replica, ...sentinels];
  try {
    await primary.start();
    await replica.start();
    for (let i = 0; i < 3; i++) {
      const d = dirOf(`sentinel-${i}`);
      const conf = join(d, 'sentinel.conf');
      writeFileSync(
        conf,
        [
          `sentinel monitor ${SENTINEL_MASTER_NAME} ${primaryHost} ${primaryPort} 2`,
          `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} ${opts.downAfterMs}`,
          `sentinel failover-timeout ${SENTINEL_MASTER_NAME} ${opts.failoverTimeoutMs}`,
          `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
          '',
        ].join('\n'),
      );
      const s = ownRedis(d, await freePort(), { conf, args: ['--sentinel'], log: 'sentinel.log' });
      sentinels.push(s);
      await s.start();
    }
    // Ready once the replica is linked and every sentinel has found it (a failover needs both).
    const deadline = Date.now() + 20_000;
    for (;;) {
      const linked = (await linkedReplicas(primaryPort)) >= 1;
      const known = await Promise.all(
        sentinels.map((s) =>
          ask(s.port, async (r) => {
            const replicas = (await r.call('SENTINEL', 'REPLICAS', SENTINEL_MASTER_NAME)) as unknown[];
            const others = (await r.call('SENTINEL', 'SENTINELS', SENTINEL_MASTER_NAME)) as unknown[];
            return replicas.length >= 1 && others.length >= 2;
          }),
        ),
      );
      if (linked && known.every(Boolean)) break;
      if (Date.now() > deadline) throw new Error(`the sentinel setup did not settle in 20 s (see ${dir})`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } catch (err) {
    await Promise.allSettled(all().map((s) => s.stop('SIGKILL')));
    await proxy?.close();
    throw err;
  }
  return {
    primary,
    replica,
    sentinels,
    proxy,
    sentinelList: sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
    async masterPort() {
      for (const s of sentinels) {
        const addr = await ask(
          s.port,
          (r) =>
            r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_MASTER_NAME) as Promise<string[] | null>,
        );
        if (addr?.[1]) return Number(addr[1]);
      }
      return undefined;
    },
    async stop(signal: NodeJS.Signals = 'SIGKILL') {
      await Promise.allSettled(all().map((s) => s.stop(signal)));
      await proxy?.close();
    },
    pids: () => all().flatMap((s) => s.pid() ?? []),
  };
}
