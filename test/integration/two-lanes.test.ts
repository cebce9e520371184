import { afterAll, describe, expect, it } from 'vitest';
import type { Chatlane } from '../../src/start/options.js';
import { startChatlane } from '../../src/start/start-chatlane.js';
import { sampleValue } from '../helpers/prom.js';
import { deleteLabel, REDIS_ENV, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';

/**
 * Two chatlanes in one process, each with its own key prefix, model and metrics: each answers
 * its own chats, and each one's /metrics counts its own work only (a registry per process
 * counted both in each).
 */

const LABEL = 'two-lanes';
const lanes: Chatlane[] = [];

afterAll(async () => {
  await Promise.all(lanes.map((l) => l.close()));
  const redis = testRedis();
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

async function lane(): Promise<Chatlane> {
  const started = await startChatlane({
    roles: ['ingress', 'worker'],
    model: scriptedModel().model,
    tracing: false,
    env: {
      ...REDIS_ENV,
      CHATLANE_PREFIX: randomPrefix(LABEL),
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      LOG_LEVEL: 'silent',
    },
  });
  lanes.push(started);
  return started;
}

async function send(url: string, chatKey: string, text: string): Promise<void> {
  const res = await fetch(`${url}/v1/chats/${chatKey}/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: 'm1', text }),
  });
  expect(res.status).toBe(202);
}

const outbox = async (url: string, chatKey: string) =>
  (
    (await (await fetch(`${url}/v1/chats/${chatKey}/outbox`)).json()) as { items: Array<{ text: string }> }
  ).items.map((i) => i.text);

describe('two chatlanes in one process', () => {
  it('each answers its own chat and counts only its own messages and turns', async () => {
    const [a, b] = [await lane(), await lane()];
    expect(a.url).not.toBe(b.url);
    await send(a.url!, 'shared-name', 'to a');
    await send(b.url!, 'shared-name', 'to b');
    await waitFor(async () => (await outbox(a.url!, 'shared-name')).length > 0, { what: 'a answered' });
    await waitFor(async () => (await outbox(b.url!, 'shared-name')).length > 0, { what: 'b answered' });
    // The same chat key in two key spaces: two chats.
    expect(await outbox(a.url!, 'shared-name')).toEqual(['echo: to a']);
    expect(await outbox(b.url!, 'shared-name')).toEqual(['echo: to b']);

    for (const l of [a, b]) {
      const ingress = await (await fetch(`${l.url}/metrics`)).text();
      expect(sampleValue(ingress, 'chatlane_messages_total', { result: 'accepted' })).toBe(1);
      const worker = await (await fetch(`${l.metricsUrl}/metrics`)).text();
      expect(sampleValue(worker, 'chatlane_turn_duration_seconds_count', { outcome: 'done' })).toBe(1);
      // The process's own metrics are in each scrape, once.
      expect(sampleValue(worker, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    }
  });
});
