import { Cluster, Command, type Redis } from 'ioredis';
import type { Config } from './config.js';
import type { RedisClient } from './redis.js';

/**
 * REDIS_REPLICA_ACKS (docs/production-redis.md): a chat's write counts as kept only once
 * `WAIT n timeout` says n replicas have it, so a failover that promotes one of them cannot
 * lose it. Replication is asynchronous otherwise: the promoted replica may lack the last
 * writes the old primary acknowledged.
 *
 * WAIT counts the replicas that have every write *this connection* made so far, so it is
 * sent on the very connection that wrote: the client itself on a single Redis or Sentinel,
 * on a Cluster the node connection serving the chat's slot (where the chat's scripts ran).
 * A connection that reconnected in between (a failover) may now talk to another server,
 * which would confirm writes it never saw: that counts as not confirmed.
 */

export class ReplicationTimeoutError extends Error {
  override name = 'ReplicationTimeoutError';
  constructor(
    readonly wanted: number,
    readonly got: number,
    readonly timeoutMs: number,
    readonly reason: 'timeout' | 'reconnected' = 'timeout',
  ) {
    super(
      reason === 'timeout'
        ? `${got} of ${wanted} replicas confirmed the write within ${timeoutMs}ms`
        : 'the connection to Redis changed between the write and its confirmation',
    );
  }
}

/** The connection a chat's writes went through and how often it had (re)connected then. */
export interface WriteMark {
  readonly connection: Redis | undefined;
  readonly readyCount: number;
}

export interface ReplicaAcks {
  readonly replicas: number;
  /** Before the write: remembers the connection serving `key`, to confirm on it afterwards. */
  mark(client: RedisClient, key: string): WriteMark;
  /** After the write: resolves once `replicas` replicas have it; else ReplicationTimeoutError. */
  confirm(mark: WriteMark): Promise<void>;
}

const readyCounts = new WeakMap<Redis, { n: number }>();

/** Counts a connection's (re)connects from the first time it is seen. */
function readyCount(connection: Redis): number {
  let count = readyCounts.get(connection);
  if (!count) {
    const c = { n: 0 };
    count = c;
    readyCounts.set(connection, c);
    connection.on('ready', () => {
      c.n++;
    });
  }
  return count.n;
}

/** The node connection serving `key`'s slot on a Cluster (undefined while the slot has none). */
function nodeFor(cluster: Cluster, key: string): Redis | undefined {
  const slot = new Command('exists', [key]).getSlot();
  const nodeKey = slot === null ? undefined : cluster.slots[slot]?.[0];
  if (!nodeKey) return undefined;
  return cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === nodeKey);
}

export function replicaAcks(
  config: Pick<Config, 'REDIS_REPLICA_ACKS' | 'REDIS_REPLICA_ACKS_TIMEOUT_MS'>,
): ReplicaAcks | undefined {
  const replicas = config.REDIS_REPLICA_ACKS;
  const timeoutMs = config.REDIS_REPLICA_ACKS_TIMEOUT_MS;
  if (replicas <= 0) return undefined;
  return {
    replicas,
    mark(client, key) {
      const connection = client instanceof Cluster ? nodeFor(client, key) : client;
      return { connection, readyCount: connection ? readyCount(connection) : 0 };
    },
    async confirm(mark) {
      const { connection } = mark;
      if (connection?.status !== 'ready' || readyCount(connection) !== mark.readyCount) {
        throw new ReplicationTimeoutError(replicas, 0, timeoutMs, 'reconnected');
      }
      const got = Number(await connection.call('WAIT', replicas, timeoutMs));
      // A reconnect while WAIT was in flight resends it to whatever server answers now.
      if (readyCount(connection) !== mark.readyCount) {
        throw new ReplicationTimeoutError(replicas, got, timeoutMs, 'reconnected');
      }
      if (got < replicas) throw new ReplicationTimeoutError(replicas, got, timeoutMs);
    },
  };
}
