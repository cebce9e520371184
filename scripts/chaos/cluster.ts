import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ask } from './redis-server.js';

/**
 * A throwaway Redis Cluster with one replica per master (scripts/redis-cluster.sh) on a free
 * port range, for the failover run: which master to kill, its replica, and when that replica
 * has taken over.
 */

const SCRIPT = fileURLToPath(new URL('../redis-cluster.sh', import.meta.url));
const run = promisify(execFile);

export interface ClusterSetup {
  /** REDIS_CLUSTER_NODES. */
  nodes: string;
  ports: number[];
  pid(port: number): number | undefined;
  /** Masters and the port of their replica, as the cluster says now. */
  shards(): Promise<Array<{ master: number; replica: number | undefined }>>;
  /** The slot ranges `port` serves now ([from, to] inclusive). */
  slotsOf(port: number): Promise<Array<[number, number]>>;
  /** Is `port` a master with slots, and does the cluster say ok? */
  isServingMaster(port: number, askPort: number): Promise<boolean>;
  /** Start a killed node again: it rejoins (as a replica once its shard failed over). */
  restart(port: number): Promise<void>;
  stop(): Promise<void>;
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** Where Linux starts handing out ports to outgoing connections (ip_local_port_range). */
const EPHEMERAL_FROM = 32_768;

/** A base port with `size` node ports and their cluster bus ports (+10000) free. */
export async function freeRange(size: number): Promise<number> {
  for (let i = 0; i < 50; i++) {
    // Node ports and their bus ports (+10,000) stay below Linux's ephemeral range (32768 up):
    // a check now cannot keep an outgoing connection of a process beside us (CI runs chaos
    // next to failover) from taking one before the server binds it ("did not come up").
    const base = 20_000 + Math.floor(Math.random() * (EPHEMERAL_FROM - 10_000 - 20_000 - size));
    let free = true;
    for (let p = base; p < base + size && free; p++)
      free = (await portFree(p)) && (await portFree(p + 10_000));
    if (free) return base;
  }
  throw new Error('no free port range for the cluster');
}

async function clusterNodes(port: number): Promise<string[][]> {
  const rows = await ask(port, async (r) => {
    const text = (await r.call('CLUSTER', 'NODES')) as string;
    const info = (await r.call('CLUSTER', 'INFO')) as string;
    return info.includes('cluster_state:ok')
      ? text
          .trim()
          .split('\n')
          .map((l) => l.split(' '))
      : [];
  });
  return rows ?? [];
}

const portOf = (addr: string) => Number(/:(\d+)@/.exec(addr)?.[1]);

export async function startCluster(dir: string, opts: { nodeTimeoutMs: number }): Promise<ClusterSetup> {
  const base = await freeRange(6);
  const env = {
    ...process.env,
    REDIS_CLUSTER_BASE_PORT: String(base),
    REDIS_CLUSTER_REPLICAS: '1',
    REDIS_CLUSTER_NODE_TIMEOUT: String(opts.nodeTimeoutMs),
  };
  const { stdout } = await run(SCRIPT, ['start', dir], { env });
  const nodes = stdout.trim().split('\n').at(-1)!;
  const ports = nodes.split(',').map((n) => Number(n.split(':')[1]));
  const pid = (port: number) => {
    try {
      return Number(readFileSync(join(dir, `redis-${port}.pid`), 'utf8').trim()) || undefined;
    } catch {
      return undefined;
    }
  };
  return {
    nodes,
    ports,
    pid,
    async shards() {
      for (const ask of ports) {
        const rows = await clusterNodes(ask);
        if (rows.length === 0) continue;
        const masters = rows.filter(
          (r) => r[2]!.includes('master') && !r[2]!.includes('fail') && r.length > 8,
        );
        return masters.map((m) => ({
          master: portOf(m[1]!),
          replica: rows
            .filter((r) => r[3] === m[0] && !r[2]!.includes('fail'))
            .map((r) => portOf(r[1]!))
            .at(0),
        }));
      }
      return [];
    },
    async slotsOf(port) {
      for (const ask of ports) {
        const me = (await clusterNodes(ask)).find((r) => portOf(r[1]!) === port);
        if (!me) continue;
        return me.slice(8).flatMap((range): Array<[number, number]> => {
          const [from, to] = range.split('-').map(Number);
          return Number.isInteger(from) ? [[from!, to ?? from!]] : [];
        });
      }
      return [];
    },
    async isServingMaster(port, askPort) {
      const rows = await clusterNodes(askPort);
      const me = rows.find((r) => portOf(r[1]!) === port);
      return me !== undefined && me[2]!.includes('master') && !me[2]!.includes('fail') && me.length > 8;
    },
    async restart(port) {
      await run(SCRIPT, ['start-node', dir, String(port)], { env });
    },
    async stop() {
      await run(SCRIPT, ['stop', dir], { env }).catch(() => undefined);
    },
  };
}
