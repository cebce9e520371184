import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Cluster } from 'ioredis';
import { startWebChatServer, WEB_CHAT_DIST, webChatBuilt } from './demo-web.js';
import { ensureRedis } from './dev-redis.js';
import { startIngress } from './ingress/main.js';
import { startMockLlm } from './mock-llm/server.js';
import { loadConfig } from './shared/config.js';
import { silentLogger } from './shared/logger.js';
import { createRedisClient } from './shared/redis.js';
import { startWorker } from './worker/process/main.js';

/**
 * `chatlane demo --web`: the web chat page (examples/web-chat, built) against a local
 * ingress and worker and the mock model, which streams its answers slowly enough to watch
 * them grow. Runs until Ctrl-C.
 */
export async function runWebDemo(): Promise<number> {
  const dir = fileURLToPath(WEB_CHAT_DIST);
  if (!webChatBuilt(dir)) {
    console.error(`chatlane demo --web: the page is not built (${dir}); run: npm run build:web`);
    return 2;
  }
  const base = loadConfig();
  const redisServer = base.REDIS_CLUSTER_NODES
    ? { started: false, stop: async () => undefined }
    : await ensureRedis(base.REDIS_URL);
  const mock = await startMockLlm({ port: 0, latencyMs: [200, 400], chunkMs: 60 });
  // A secret for this run only: the demo's page server mints, the ingress verifies.
  const secret = randomBytes(32).toString('hex');
  let ingressUrl = '';
  const web = await startWebChatServer({ dir, secret, ingressUrl: () => ingressUrl });
  const prefix = `chatlane-demo-${randomBytes(3).toString('hex')}`;
  const config = {
    ...base,
    CHATLANE_PREFIX: prefix,
    HOST: '127.0.0.1',
    PORT: 0,
    METRICS_PORT: 0,
    LLM_BASE_URL: mock.url,
    LLM_MODEL: 'mock',
    WEB_TOKEN_SECRET: secret,
    WEB_ORIGINS: [web.url],
  };
  const logger = silentLogger();
  const worker = await startWorker(config, logger);
  const ingress = await startIngress(config, logger);
  ingressUrl = ingress.url;
  const admin = createRedisClient(config, 'worker');
  console.log(
    `chatlane web chat demo — ingress ${ingress.url}, mock model ${mock.url}\n\n  open ${web.url}/?chat=demo-web\n\n(any ?chat=<chatKey>; the page gets its browser token from ${web.url}/token). Ctrl-C stops.`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await web.close();
  await ingress.close();
  await worker.close();
  await mock.close();
  for (const node of admin instanceof Cluster ? admin.nodes('master') : [admin]) {
    for (const key of await node.keys(`${prefix}:*`)) await node.del(key);
  }
  admin.disconnect();
  await redisServer.stop();
  return 0;
}
