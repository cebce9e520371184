import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startMockLlm } from '../mock-llm/server.js';
import { loadConfig } from '../shared/config.js';
import { silentLogger } from '../shared/logger.js';
import { launch } from '../start/launch.js';
import { demoConfig, demoRedis, dropDemoKeys } from './env.js';
import { startWebChatServer, WEB_CHAT_DIST, webChatBuilt } from './web.js';

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
  const redisServer = await demoRedis(base);
  const mock = await startMockLlm({ port: 0, latencyMs: [200, 400], chunkMs: 60 });
  // A secret for this run only: the page server mints tokens with it, the ingress checks them.
  const secret = randomBytes(32).toString('hex');
  let ingressUrl = '';
  const web = await startWebChatServer({ dir, secret, ingressUrl: () => ingressUrl });
  const config = { ...demoConfig(base, mock.url), WEB_TOKEN_SECRET: secret, WEB_ORIGINS: [web.url] };
  // The roles `chatlane all` runs but the compactor, through the code startChatlane runs.
  const lane = await launch(config, { roles: ['worker', 'ingress'], logger: silentLogger(), tracing: false });
  const url = lane.url!;
  ingressUrl = url;
  console.log(
    [
      `chatlane web chat demo — ingress ${url}, mock model ${mock.url}, Redis prefix ${config.CHATLANE_PREFIX}`,
      '',
      `  open ${web.url}/?chat=demo-web`,
      '',
      `Any ?chat=<chatKey> works: the page gets a browser token for it from ${web.url}/token.`,
      'Ctrl-C stops.',
    ].join('\n'),
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await web.close();
  await lane.close();
  await mock.close();
  await dropDemoKeys(config);
  await redisServer.stop();
  return 0;
}
