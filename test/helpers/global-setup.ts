import { Cluster, Redis } from 'ioredis';
import { loadConfig } from '../../src/shared/config.js';

/** Tests need a real Redis: fail the run at once, with a clear message, when none answers. */
export default async function setup(): Promise<void> {
  const { REDIS_URL: url, REDIS_CLUSTER_NODES: nodes } = loadConfig();
  if (nodes) {
    // A cluster run: every master must answer and the cluster must be serving all slots.
    const cluster = new Cluster(nodes, { lazyConnect: true, clusterRetryStrategy: () => null });
    const where = nodes.map((n) => `${n.host}:${n.port}`).join(',');
    try {
      await cluster.connect();
      const info = await cluster.cluster('INFO');
      if (!/cluster_state:ok/.test(info)) throw new Error('cluster_state is not ok');
    } catch (err) {
      throw new Error(
        `tests need the Redis Cluster at ${where} (REDIS_CLUSTER_NODES; scripts/redis-cluster.sh start <dir>): ${(err as Error).message}`,
      );
    } finally {
      cluster.disconnect();
    }
    return;
  }
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new Error(`tests need Redis at ${url} (set REDIS_URL): ${(err as Error).message}`);
  } finally {
    redis.disconnect();
  }
}
