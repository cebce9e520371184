import { type ClientRequest, get, type IncomingMessage } from 'node:http';
import { EventSource } from 'eventsource';
import { afterAll, describe, expect, it } from 'vitest';
import { postMessage, type RoleProcess } from '../helpers/processes.js';
import { sampleValue } from '../helpers/prom.js';
import { REDIS_CLUSTER_NODES, waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

interface Got {
  type: string;
  data: { text?: string };
}

function listen(url: string): { es: EventSource; got: Got[]; ready: Promise<unknown> } {
  const got: Got[] = [];
  const es = new EventSource(url);
  for (const type of ['ready', 'outbox', 'event']) {
    es.addEventListener(type, (e) => got.push({ type, data: JSON.parse(e.data) as Got['data'] }));
  }
  return { es, got, ready: waitFor(async () => got.length > 0, { what: 'the ready event' }) };
}

async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return sampleValue(text, name) ?? Number.NaN;
}

/**
 * The least a memory gauge reads over ~2 s of samples. Heap used includes garbage not yet
 * collected, up to several MB between two GCs on a busy host: the low point after a
 * collection is what the process keeps.
 */
async function settledMetric(base: string, name: string, samples = 8): Promise<number> {
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < samples; i++) {
    least = Math.min(least, await metric(base, name));
    await new Promise((r) => setTimeout(r, 250));
  }
  return least;
}

describe('the live stream across ingress processes', () => {
  const stack = useStack('e2e-sse', {
    roles: ['ingress', 'ingress', 'worker'],
    env: { SSE_HEARTBEAT_MS: '1000' },
  });
  const sources: EventSource[] = [];
  afterAll(() => {
    for (const es of sources) es.close();
  });

  it('a client on the ingress that did not take the message receives the reply', async () => {
    const [a, b] = stack.procs.filter((p) => p.url) as [RoleProcess, RoleProcess];
    expect(a.url).not.toBe(b.url);
    const client = listen(`${b.url}/v1/chats/sse-chat/stream`);
    sources.push(client.es);
    await client.ready;
    await postMessage(a.url!, 'sse-chat', 'm1', 'hello over there');
    await waitFor(async () => client.got.some((g) => g.type === 'outbox'), {
      what: 'the reply on the other ingress',
    });
    expect(client.got.find((g) => g.type === 'outbox')?.data.text).toBe('echo: hello over there');
    // The turn's commit event follows on the same stream.
    await waitFor(async () => client.got.some((g) => g.type === 'event'), { what: 'the turn event' });
  });

  it('SIGTERM ends open streams and the ingress exits 0 promptly', async () => {
    const ingress = await stack.start('ingress');
    const client = listen(`${ingress.url}/v1/chats/sse-bye/stream`);
    sources.push(client.es);
    await client.ready;
    const exited = new Promise<number | null>((resolve) => ingress.child.once('exit', resolve));
    const started = Date.now();
    ingress.child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('1,000 idle stream clients on one ingress', () => {
  const stack = useStack('e2e-sse-idle', { roles: ['ingress'], env: { SSE_HEARTBEAT_MS: '2000' } });
  const requests: ClientRequest[] = [];
  afterAll(() => {
    for (const r of requests) r.destroy();
  });

  /** A bare SSE client: one socket, reads and drops what comes, resolves on the ready event. */
  function openIdle(base: string, chatKey: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const req = get(`${base}/v1/chats/${chatKey}/stream`, { agent: false }, (res: IncomingMessage) => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}`));
        res.on('data', (chunk: Buffer) => {
          if (chunk.includes('event: ready')) resolve();
        });
      });
      req.on('error', reject);
      requests.push(req);
    });
  }

  it('cost bounded memory per client, all served by one reader', async () => {
    const base = stack.ingressUrl();
    // Warm up: the hub, its reader connection and the route's code paths exist before the baseline.
    for (let i = 0; i < 20; i++) await openIdle(base, `warm-${i}`);
    await new Promise((r) => setTimeout(r, 1000));
    const rss0 = await settledMetric(base, 'process_resident_memory_bytes');
    const heap0 = await settledMetric(base, 'nodejs_heap_size_used_bytes');

    const N = 1000;
    for (let i = 0; i < N; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => openIdle(base, `idle-${i + j}`)));
    }
    expect(await metric(base, 'chatlane_sse_clients')).toBe(N + 20);
    // A few heartbeats go by: memory that grows per heartbeat would show.
    await new Promise((r) => setTimeout(r, 5000));
    const rss1 = await settledMetric(base, 'process_resident_memory_bytes');
    // The least over 10 s: garbage of the opening burst stays in the old generation until V8's
    // next major collection, which a loaded machine (the suite beside it) can put off.
    const heap1 = await settledMetric(base, 'nodejs_heap_size_used_bytes', 40);
    const perClient = { rssKiB: (rss1 - rss0) / N / 1024, heapKiB: (heap1 - heap0) / N / 1024 };
    console.log(
      `1,000 idle SSE clients: RSS +${perClient.rssKiB.toFixed(1)} KiB, heap +${perClient.heapKiB.toFixed(1)} KiB per client`,
    );
    // Generous bounds (a socket, its HTTP state and our few objects are a few KiB): this catches
    // a per-client buffer, timer or Redis connection, not allocator noise.
    expect(perClient.heapKiB).toBeLessThan(32);
    expect(perClient.rssKiB).toBeLessThan(128);
    // One blocking reader connection serves them all (no connection or poll per client); a
    // Cluster is polled over the ingress's own connections instead.
    if (!REDIS_CLUSTER_NODES) {
      const clients = String(await stack.redis.call('CLIENT', 'LIST'));
      const readers = clients.split('\n').filter((l) => l.includes(`name=chatlane:stream:${stack.prefix} `));
      expect(readers).toHaveLength(1);
    }
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
  }, 120_000);
});
