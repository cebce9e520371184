import type { Queue } from 'bullmq';
import { pino } from 'pino';
import type { AdminOptions } from '../../src/ingress/admin.js';
import { buildIngress, type IngressApp, type IngressSecurity } from '../../src/ingress/app.js';
import { createQueue, QUEUES, type TurnJob, watchQueues } from '../../src/shared/jobs.js';
import { createMetrics, type Metrics } from '../../src/shared/metrics.js';
import type { RedisClient } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';

export interface OpsIngress {
  app: IngressApp;
  store: ChatStore;
  turns: Queue<TurnJob>;
  queues: Queue[];
  metrics: Metrics;
  /** pino lines the app logged. */
  logs: Array<{ level: number; msg: string } & Record<string, unknown>>;
  close(): Promise<void>;
}

/** An ingress watching every queue, with its own metrics registry and a captured log. */
export async function opsIngress(
  redis: RedisClient,
  prefix: string,
  opts: { admin?: AdminOptions; apiToken?: string; security?: IngressSecurity } = {},
): Promise<OpsIngress> {
  const store = new ChatStore(redis, { prefix, maxEvents: 100 });
  const turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
  const queues: Queue[] = [turns, ...watchQueues(prefix, redis).filter((q) => q.name !== QUEUES.turns)];
  const metrics = createMetrics();
  const logs: OpsIngress['logs'] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line)) });
  const app = await buildIngress({
    redis,
    store,
    turns,
    queues,
    metrics,
    apiToken: opts.apiToken,
    admin: opts.admin,
    ...(opts.security && { security: opts.security }),
    logger,
    limits: { maxPendingPerChat: 2, dedupWindowMs: 60_000, bodyLimitBytes: 256 * 1024 },
  });
  return {
    app,
    store,
    turns,
    queues,
    metrics,
    logs,
    async close() {
      await app.close();
      await Promise.all(queues.map((q) => q.close()));
    },
  };
}
