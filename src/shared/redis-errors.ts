import { ReplyError } from 'ioredis';

/**
 * Is this error Redis being unreachable, hung or refusing writes — something a client may
 * retry with the same message id — rather than a bug or bad input? Only these become 503
 * REDIS_UNAVAILABLE; anything else is a 500 (and logged), so that a 503 never tells a
 * client to retry forever what can never succeed.
 */

// Replies that say "not now": memory full (noeviction), a long script, loading, a replica
// or a cluster in failover. A Cluster redirect that reached us is one too (isClusterRedirect).
const UNAVAILABLE_REPLY = /^(OOM|BUSY|LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|NOREPLICAS|MISCONF)\b/;

const REDIRECT_REPLY = /^(MOVED|ASK)\b/;
// ioredis re-running an auto-pipelined batch whose slots now live on different nodes.
const SLOTS_SPLIT_MESSAGE = /should belong to the same slots allocation group/;

// ioredis's own connection errors (it throws plain Errors with these messages).
const CONNECTION_MESSAGE =
  /Connection is closed|Stream isn't writeable|enableOfflineQueue options is false|Command timed out|Socket timeout|Cluster is disconnect|Node is disconnected|All sentinels are unreachable|None of startup nodes is available|Failed to refresh slots cache|Too many Cluster redirections|connect ETIMEDOUT/;

const NETWORK_CODE =
  /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN)$/;

// ReplicationTimeoutError: REDIS_REPLICA_ACKS replicas did not confirm a write in time
// (src/shared/replica-acks.ts); the write itself may well be on the primary.
const UNAVAILABLE_NAMES = new Set([
  'MaxRetriesPerRequestError',
  'ClusterAllFailedError',
  'AbortError',
  'ReplicationTimeoutError',
]);

export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (isClusterRedirect(err)) return true;
  if (err instanceof ReplyError) return UNAVAILABLE_REPLY.test(err.message);
  if (UNAVAILABLE_NAMES.has(err.name)) return true;
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === 'string' && NETWORK_CODE.test(code)) return true;
  return CONNECTION_MESSAGE.test(err.message);
}

/**
 * A Cluster's slot moved and ioredis did not follow it. It follows a MOVED or ASK of a lone
 * command, but not one inside an auto-pipelined batch whose other commands ran or failed
 * otherwise (redis/ioredis#2075): each such command fails with the redirect, and the slot
 * map stays stale until something else refreshes it. The command did not run (a redirected
 * command never does), so it is safe to retry once the map is fresh.
 */
export function isClusterRedirect(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err instanceof ReplyError) return REDIRECT_REPLY.test(err.message);
  return SLOTS_SPLIT_MESSAGE.test(err.message);
}
