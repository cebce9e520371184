import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startIngress } from '../../src/roles/ingress.js';
import { loadConfig } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { deletePrefix, REDIS_ENV, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * An ingress process closing (SIGTERM, a deploy) while clients hold connections: it must not
 * wait on a client that never sends anything.
 */

const redis = testRedis();
const prefix = randomPrefix('shutdown');
afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

/** A TCP connection to `url` that sends nothing (a browser's preconnect); resolves once open. */
function preconnect(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket));
    socket.on('error', reject);
  });
}

describe('ingress shutdown', () => {
  it('drops connections that never sent a request, and keep-alive ones once answered: close does not wait for the clients', async () => {
    const ingress = await startIngress(
      loadConfig({ ...REDIS_ENV, CHATLANE_PREFIX: prefix, HOST: '127.0.0.1', PORT: '0' }),
      silentLogger(),
    );
    const idle = await preconnect(ingress.url);
    const closedByServer = new Promise<void>((resolve) => idle.on('close', () => resolve()));
    // A keep-alive connection that has had its answer.
    const health = await fetch(`${ingress.url}/healthz`);
    expect(health.status).toBe(200);
    await health.text();

    await ingress.close();
    await closedByServer;
    expect(idle.destroyed).toBe(true);
  });
});
