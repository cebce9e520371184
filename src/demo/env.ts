import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Cluster } from 'ioredis';
import type { Config } from '../shared/config.js';
import { createRedisClient } from '../shared/redis.js';
import { ensureRedis } from './dev-redis.js';

/** What `chatlane demo` and `chatlane demo --web` share: their Redis, roles and cleanup. */

/** A local Redis, started if none answers. A cluster is never started: it must already run. */
export async function demoRedis(base: Config): Promise<{ started: boolean; stop(): Promise<void> }> {
  return base.REDIS_CLUSTER_NODES
    ? { started: false, stop: async () => undefined }
    : await ensureRedis(base.REDIS_URL);
}

/** The example skills and profile shipped with chatlane (examples/, next to dist/ and src/). */
const EXAMPLES = new URL('../../examples/', import.meta.url);

/**
 * The roles' configuration: a key prefix of their own, local ports, the mock model, and the
 * example skills (the mock loads a skill the user names: "skill: weather — …"). A development
 * run on 127.0.0.1 whatever the shell holds: its own requests carry no API token.
 */
export function demoConfig(base: Config, mockUrl: string): Config {
  return {
    ...base,
    NODE_ENV: 'development',
    API_AUTH: undefined,
    API_TOKEN: undefined,
    CHATLANE_PREFIX: `chatlane-demo-${randomBytes(3).toString('hex')}`,
    HOST: '127.0.0.1',
    PORT: 0,
    METRICS_PORT: 0,
    LLM_BASE_URL: mockUrl,
    LLM_MODEL: 'mock',
    SKILLS_DIR: fileURLToPath(new URL('skills/', EXAMPLES)),
    PROFILE_DIR: fileURLToPath(new URL('profile/', EXAMPLES)),
  };
}

/** Deletes the demo's keys. On a Cluster, KEYS answers for one node only: ask every master. */
export async function dropDemoKeys(config: Config): Promise<void> {
  const admin = createRedisClient(config, 'worker');
  try {
    for (const node of admin instanceof Cluster ? admin.nodes('master') : [admin]) {
      for (const key of await node.keys(`${config.CHATLANE_PREFIX}:*`)) await node.del(key);
    }
  } finally {
    admin.disconnect();
  }
}
