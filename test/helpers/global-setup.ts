import { Cluster } from 'ioredis';
import { ensureRedis } from '../../src/demo/dev-redis.js';
import { loadConfig } from '../../src/shared/config.js';

/**
 * Integration and e2e tests need a real Redis. When none answers at REDIS_URL and it is
 * local, a throwaway `redis-server` (no persistence) is started for the run and stopped
 * afterwards, as the demo does; otherwise the run stops at once with a clear message.
 * A Redis Cluster (REDIS_CLUSTER_NODES) is never started here: scripts/redis-cluster.sh.
 */
export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  const { REDIS_URL: url, REDIS_CLUSTER_NODES: nodes } = loadConfig();
  if (nodes) {
    // A cluster run: every master must answer and the cluster must be serving all slots.
    const cluster = new Cluster(nodes, { lazyConnect: true, clusterRetryStrategy: () => null });
    cluster.on('error', () => undefined);
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
    return undefined;
  }
  let redis: Awaited<ReturnType<typeof ensureRedis>>;
  try {
    redis = await ensureRedis(url);
  } catch (err) {
    throw new Error(`tests need Redis: ${(err as Error).message}`);
  }
  if (redis.started) console.log(`tests: started a throwaway redis-server at ${url}; it stops after the run`);
  return () => redis.stop();
}
