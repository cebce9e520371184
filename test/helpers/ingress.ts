import type { Queue } from 'bullmq';
import {
  buildIngress,
  type HttpLimits,
  type IngressApp,
  type IngressDeps,
  type IngressLimits,
} from '../../src/ingress/app.js';
import type { StreamSettings } from '../../src/ingress/stream/clients.js';
import type { GenericWebhookOptions } from '../../src/ingress/webhooks/generic.js';
import type { FilePolicy } from '../../src/shared/file-parts.js';
import { createQueue, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { RedisClient } from '../../src/shared/redis.js';
import type { ReplicaAcks } from '../../src/shared/replica-acks.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { waitFor } from './redis.js';

export interface TestIngress {
  app: IngressApp;
  store: ChatStore;
  turns: Queue<TurnJob>;
  close(): Promise<void>;
}

export interface TestIngressOptions {
  apiToken?: string;
  limits?: Partial<IngressLimits>;
  http?: HttpLimits;
  genericWebhooks?: GenericWebhookOptions;
  streams?: Partial<StreamSettings>;
  files?: FilePolicy;
  memoryMaxTokens?: number;
  platforms?: IngressDeps['platforms'];
  ingest?: IngressDeps['ingest'];
  metrics?: IngressDeps['metrics'];
  usage?: IngressDeps['usage'];
  /** REDIS_REPLICA_ACKS for the store's writes. */
  replicaAcks?: ReplicaAcks;
  web?: IngressDeps['web'];
  security?: IngressDeps['security'];
  /** How ingest resolves host names for the address policy (default: the system resolver). */
  resolve?: IngressDeps['resolve'];
  /** Bull Board's credentials (default: not mounted). */
  admin?: IngressDeps['admin'];
  /** Default: silent. */
  logger?: IngressDeps['logger'];
}

export async function testIngress(
  redis: RedisClient,
  prefix: string,
  opts: TestIngressOptions = {},
): Promise<TestIngress> {
  const store = new ChatStore(redis, { prefix, maxEvents: 100, replicaAcks: opts.replicaAcks });
  const turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
  const app = await buildIngress({
    redis,
    store,
    turns,
    apiToken: opts.apiToken,
    logger: opts.logger ?? silentLogger(),
    ...(opts.http ? { http: opts.http } : {}),
    limits: { maxPendingPerChat: 1000, dedupWindowMs: 60_000, bodyLimitBytes: 256 * 1024, ...opts.limits },
    ...(opts.genericWebhooks && { genericWebhooks: opts.genericWebhooks }),
    ...(opts.streams && { streams: opts.streams }),
    ...(opts.files && { files: opts.files }),
    ...(opts.memoryMaxTokens && { memoryMaxTokens: opts.memoryMaxTokens }),
    ...(opts.platforms && { platforms: opts.platforms }),
    ...(opts.ingest && { ingest: opts.ingest }),
    ...(opts.metrics && { metrics: opts.metrics }),
    ...(opts.usage && { usage: opts.usage }),
    ...(opts.web && { web: opts.web }),
    ...(opts.security && { security: opts.security }),
    ...(opts.resolve && { resolve: opts.resolve }),
    ...(opts.admin && { admin: opts.admin }),
  });
  return {
    app,
    store,
    turns,
    async close() {
      await app.close();
      await turns.close();
    },
  };
}

/** BullMQ writes its queue's meta key once connected: tests that compare keyspaces wait for it. */
export async function queueMetaWritten(redis: RedisClient, prefix: string): Promise<void> {
  await waitFor(async () => (await redis.exists(`${prefix}:{q:turns}:turns:meta`)) === 1, {
    what: 'queue meta',
  });
}

/** A test ingress listening on a free port of 127.0.0.1, for raw-socket tests. */
export async function listeningIngress(
  redis: RedisClient,
  prefix: string,
  opts: TestIngressOptions = {},
): Promise<{ ing: TestIngress; port: number }> {
  const ing = await testIngress(redis, prefix, opts);
  await ing.app.listen({ host: '127.0.0.1', port: 0 });
  return { ing, port: (ing.app.server.address() as { port: number }).port };
}
