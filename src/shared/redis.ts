import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import { isClusterRedirect } from './redis-errors.js';

/** A single Redis or a Redis Cluster: what every connection of chatlane is. */
export type RedisClient = Redis | Cluster;

/**
 * Connection roles differ in how they fail (DESIGN §5):
 *
 * - `worker` connections wait out a Redis blip (`maxRetriesPerRequest: null`, required by
 *   BullMQ) and carry no command timeout. BullMQ duplicates the connection it is given for
 *   its blocking fetch (BZPOPMIN for up to 10 s, bounded by BullMQ's own watchdog), and a
 *   duplicate inherits every option: a command timeout shorter than the block would cut every
 *   idle fetch. A timed-out non-blocking command is no better: Redis may still run it later
 *   (a job moved to active that nobody processes until its lock expires, a fenced write the
 *   turn gave up on). So a worker whose Redis hangs simply waits — it cannot take a job, and
 *   its running turns keep their leases, renewed as soon as Redis answers (the fence, not a
 *   timeout, decides who may write).
 * - `ingress` connections fail fast: no offline queue, and every command gives up after
 *   REDIS_COMMAND_TIMEOUT_MS, so a request gets 503 within about a second of Redis hanging
 *   instead of waiting for it. Never duplicate one for blocking reads (XREAD BLOCK): the
 *   timeout would cut them; open a `worker` connection for those.
 */
export type ConnectionRole = 'worker' | 'ingress';

export interface ConnectionTuning {
  /** Ingress only: ms after which a command is given up (0 = never). */
  commandTimeoutMs?: number | undefined;
  /**
   * Off for a connection BullMQ defines its Lua commands on: ioredis copies every defined
   * command into each auto-pipeline batch it builds (~25 KB of garbage per batch with
   * BullMQ's ~60). Turning it off there cut a worker's peak RSS by ~45 MB at 2,000 turns in
   * flight (two A/B runs of the overhead bench: 7b of docs/BENCHMARKS.md, in git history).
   */
  autoPipelining?: boolean | undefined;
}

const READONLY = /^READONLY\b/;

/**
 * A connection still talking to a primary that has become a replica (a Sentinel or managed
 * failover, a DNS name that now points elsewhere) gets READONLY on every write: drop it and
 * connect again, which asks the sentinels (or DNS) for the primary afresh. A worker resends
 * the command there (2): READONLY means it did not run — a replica executes no write, and a
 * Lua script fails at its first write. The ingress fails it (1): the request gets its 503
 * and the client's retry, with the same id, lands on the new primary.
 */
export function followPrimary(role: ConnectionRole): (err: Error) => boolean | 1 | 2 {
  const onReadOnly = role === 'worker' ? 2 : 1;
  return (err) => (READONLY.test(err.message) ? onReadOnly : false);
}

export function redisOptions(role: ConnectionRole, tuning: ConnectionTuning = {}): RedisOptions {
  // Auto-pipelining batches the commands of concurrent turns issued in one tick into one
  // socket write: fewer syscalls per turn, same ordering per connection.
  const enableAutoPipelining = tuning.autoPipelining ?? true;
  const reconnectOnError = followPrimary(role);
  if (role === 'worker')
    return { maxRetriesPerRequest: null, enableReadyCheck: true, enableAutoPipelining, reconnectOnError };
  return {
    reconnectOnError,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    enableAutoPipelining,
    ...(tuning.commandTimeoutMs ? { commandTimeout: tuning.commandTimeoutMs } : {}),
  };
}

export function createRedis(
  url: string,
  role: ConnectionRole,
  connectionName?: string,
  tuning: ConnectionTuning = {},
): Redis {
  return new Redis(url, { ...redisOptions(role, tuning), ...(connectionName ? { connectionName } : {}) });
}

/**
 * How often a Cluster connection fetches the slot map on its own (ioredis: never). A redirect
 * inside an auto-pipelined batch is neither followed nor refreshes the map (redis/ioredis#2075;
 * see isClusterRedirect): chatlane refreshes it where it sees one, and this bounds how long a
 * map can stay stale where nobody looks — one CLUSTER SLOTS per connection every 5 s.
 */
export const SLOTS_REFRESH_MS = 5000;

/**
 * After a redirect ioredis did not follow, fetch the slot map now: the caller's retry (a 503,
 * a transient turn failure, the next poll) then goes to the slot's new owner instead of
 * meeting the same redirect in the next batch. ioredis runs one refresh at a time, however
 * many ask.
 */
export function refreshSlotsOnRedirect(redis: RedisClient, err: unknown): void {
  if (redis instanceof Cluster && isClusterRedirect(err)) redis.refreshSlotsCache();
}

/**
 * The same roles on a Cluster. ioredis takes `enableOfflineQueue` only at the Cluster level
 * (its per-node connections always queue): with it off, a command fails at once while the
 * cluster is not ready or the node owning the slot is not connected. `maxRetriesPerRequest`,
 * `connectTimeout`, the command timeout and the name go to every node connection
 * (`redisOptions`), which is also where BullMQ looks for `maxRetriesPerRequest: null`.
 */
export function clusterOptions(
  role: ConnectionRole,
  url?: string,
  tuning: ConnectionTuning = {},
): ClusterOptions {
  const node: NonNullable<ClusterOptions['redisOptions']> = {};
  if (url) {
    // REDIS_URL lends credentials and TLS to every node; its host and db are not used.
    const u = new URL(url);
    if (u.username) node.username = decodeURIComponent(u.username);
    if (u.password) node.password = decodeURIComponent(u.password);
    if (u.protocol === 'rediss:') node.tls = {};
  }
  const enableAutoPipelining = tuning.autoPipelining ?? true;
  if (role === 'worker') {
    return {
      enableReadyCheck: true,
      enableAutoPipelining,
      slotsRefreshInterval: SLOTS_REFRESH_MS,
      redisOptions: { ...node, maxRetriesPerRequest: null },
    };
  }
  return {
    enableOfflineQueue: false,
    enableAutoPipelining,
    slotsRefreshInterval: SLOTS_REFRESH_MS,
    redisOptions: {
      ...node,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      ...(tuning.commandTimeoutMs ? { commandTimeout: tuning.commandTimeoutMs } : {}),
    },
  };
}

/** Where Redis is: a single server, a Sentinel-monitored master, or a Cluster. */
export type RedisTopology = Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES'> &
  Partial<
    Pick<
      Config,
      'REDIS_COMMAND_TIMEOUT_MS' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME' | 'REDIS_SENTINEL_PASSWORD'
    >
  >;

/**
 * Sentinel mode: ioredis asks the sentinels for the master at every (re)connect and checks
 * the server's role when it gets there (a master that was just demoted is refused and the
 * sentinels asked again). REDIS_URL lends the data nodes' credentials and db; rediss: turns
 * TLS on towards the sentinels and the data nodes alike.
 */
export function sentinelOptions(
  config: Required<Pick<RedisTopology, 'REDIS_URL' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME'>> &
    Pick<RedisTopology, 'REDIS_SENTINEL_PASSWORD'>,
): RedisOptions {
  const u = new URL(config.REDIS_URL);
  const tls = u.protocol === 'rediss:';
  const db = Number(u.pathname.slice(1) || 0);
  return {
    sentinels: config.REDIS_SENTINELS,
    name: config.REDIS_SENTINEL_NAME,
    role: 'master',
    // Off: when +switch-master arrives while a connection is already reconnecting (the old
    // primary died, which is exactly then), ioredis 5.11 rejects that connect and ends the
    // connection for good (Redis#connect sets status "end" on a connector error). Seen in
    // the failover run under load. A dead primary resets its connections anyway, and a
    // demoted one answers READONLY (see followPrimary) after the sentinels CLIENT KILL its
    // clients.
    failoverDetector: false,
    ...(config.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: config.REDIS_SENTINEL_PASSWORD } : {}),
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(Number.isInteger(db) && db > 0 ? { db } : {}),
    ...(tls ? { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
  };
}

/**
 * One connection for `role`: an ioredis Cluster when REDIS_CLUSTER_NODES is set, a
 * Sentinel-resolved master when REDIS_SENTINELS is, else Redis at REDIS_URL. Every process
 * builds its connections here (BullMQ's blocking ones are duplicates of these, with the same
 * options), so each follows a failover the same way.
 */
export function createRedisClient(
  config: RedisTopology,
  role: ConnectionRole,
  connectionName?: string,
  opts: Pick<ConnectionTuning, 'autoPipelining'> = {},
): RedisClient {
  const tuning = { commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS, ...opts };
  if (config.REDIS_SENTINELS?.length && config.REDIS_SENTINEL_NAME) {
    return keepConnecting(
      new Redis({
        ...redisOptions(role, tuning),
        ...sentinelOptions({
          ...config,
          REDIS_SENTINELS: config.REDIS_SENTINELS,
          REDIS_SENTINEL_NAME: config.REDIS_SENTINEL_NAME,
        }),
        ...(connectionName ? { connectionName } : {}),
      }),
    );
  }
  if (!config.REDIS_CLUSTER_NODES?.length) return createRedis(config.REDIS_URL, role, connectionName, tuning);
  const options = clusterOptions(role, config.REDIS_URL, tuning);
  if (connectionName) options.redisOptions = { ...options.redisOptions, connectionName };
  return new Cluster(config.REDIS_CLUSTER_NODES, options);
}

/** Wait until a fail-fast connection is ready (it queues nothing while offline). */
export async function waitReady(redis: RedisClient, timeoutMs = 5000): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`redis not ready after ${timeoutMs}ms (status ${redis.status})`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      redis.off('ready', onReady);
    };
    redis.on('ready', onReady);
  });
}

/** Connections closed on purpose (closeRedis): `keepConnecting` leaves those ended. */
const closing = new WeakSet<RedisClient>();

/**
 * A Sentinel connection whose connect fails inside ioredis's connector (a sentinel answered
 * while the connection was being torn down) ends for good instead of retrying: start it
 * again, unless it was closed on purpose. Without this a failover could leave a process
 * answering "Connection is closed." until restarted.
 */
function keepConnecting(redis: Redis): Redis {
  redis.on('end', () => {
    if (closing.has(redis)) return;
    setTimeout(() => {
      if (!closing.has(redis) && redis.status === 'end') redis.connect().catch(() => undefined);
    }, 1000).unref();
  });
  return redis;
}

/** quit() that never throws and can be called twice. */
export async function closeRedis(redis: RedisClient): Promise<void> {
  closing.add(redis);
  if (redis.status === 'end') return;
  // Not connected: QUIT would wait in the offline queue for a connection that may never come.
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}

const POLICY_CHECK_TIMEOUT_MS = 3000;

/**
 * Warn when Redis may evict keys: chat state and BullMQ jobs must never vanish under memory
 * pressure (DESIGN §5). Reads `CONFIG GET maxmemory-policy` from the server, or from every
 * master of a Cluster. Managed services often disable or rename CONFIG: then it logs at
 * debug and moves on. Never throws and never waits more than a few seconds.
 */
export async function checkRedisPolicy(client: RedisClient, logger: Logger): Promise<void> {
  const check = async (): Promise<void> => {
    let nodes: Redis[];
    if (client instanceof Cluster) {
      await waitReady(client, POLICY_CHECK_TIMEOUT_MS);
      nodes = client.nodes('master');
    } else {
      nodes = [client];
    }
    await Promise.all(
      nodes.map(async (node) => {
        const where = `${node.options.host}:${node.options.port}`;
        let policy: string | undefined;
        try {
          const reply = (await node.config('GET', 'maxmemory-policy')) as unknown;
          if (Array.isArray(reply) && typeof reply[1] === 'string') policy = reply[1];
        } catch (err) {
          logger.debug({ redis: where, err: (err as Error).message }, 'cannot read maxmemory-policy');
          return;
        }
        if (policy === undefined) {
          logger.debug({ redis: where }, 'cannot read maxmemory-policy (CONFIG GET answered nothing)');
        } else if (policy !== 'noeviction') {
          logger.warn(
            { redis: where, maxmemoryPolicy: policy },
            'Redis maxmemory-policy is not noeviction: under memory pressure Redis may evict chat state and queued jobs',
          );
        }
      }),
    );
  };
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise<void>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer in ${POLICY_CHECK_TIMEOUT_MS}ms`)),
          POLICY_CHECK_TIMEOUT_MS,
        );
      }),
    ]);
  } catch (err) {
    logger.debug({ err: (err as Error).message }, 'cannot read maxmemory-policy');
  } finally {
    clearTimeout(timer);
  }
}
