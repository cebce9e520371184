import { connect, createServer, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { ensureRedis } from '../../src/demo/dev-redis.js';
import { lazyChatKeys } from '../../src/shared/keys.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import { type RoleProcess, startRole } from '../../test/helpers/processes.js';
import { sampleValue } from '../../test/helpers/prom.js';
import { freePort, inBatches, randomPrefix } from '../lib/util.js';

/**
 * The processes of the stream benchmark: a redis-server of its own (other helpers' traffic on
 * the shared one would blur latencies and pollute the command counts), the mock model paced
 * to stream, ingress and worker processes (`dist/cli.js`), per-chat browser tokens, and a
 * byte-counting TCP proxy that tells one role's Redis traffic from another's.
 */

export const WEB_SECRET = 'stream-bench-web-token-secret-of-32-chars-or-more';
export const API_TOKEN = 'stream-bench-api-token-of-32-chars-or-more';
/** /metrics of an ingress needs it while /v1 needs a token (docs/security.md). */
export const METRICS_TOKEN = 'stream-bench-metrics-token-of-32-chars';

export interface OwnRedis {
  url: string;
  port: number;
  admin: Redis;
  stop(): Promise<void>;
}

export async function ownRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const server = await ensureRedis(url);
  if (!server.started) throw new Error(`port ${port} already had a Redis: refusing to measure a shared one`);
  const admin = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: null });
  return {
    url,
    port,
    admin,
    async stop() {
      admin.disconnect();
      await server.stop();
    },
  };
}

export interface StackOptions {
  redisUrl: string;
  /** REDIS_URL of the ingresses and of the workers, when they differ (the counting proxy). */
  ingressRedisUrl?: string;
  workerRedisUrl?: string;
  ingresses: number;
  workers: number;
  workerConcurrency: number;
  /** Mock model: latency of every call [min, max] ms, and the pause between streamed chunks. */
  latencyMs: [number, number];
  chunkMs: number;
  env?: Record<string, string>;
  /** Flags for node itself in every worker process (V8 flags). */
  workerNodeArgs?: string[];
}

export interface Stack {
  prefix: string;
  mock: RoleProcess;
  mockBase: string;
  ingresses: RoleProcess[];
  workers: RoleProcess[];
  control(body: Record<string, unknown>): Promise<void>;
  /** When each chat's first streamed answer with content wrote its first content event. */
  firstContent(chatKeyPrefix: string): Promise<Record<string, number[]>>;
  stop(): Promise<void>;
}

export async function startStack(o: StackOptions): Promise<Stack> {
  const prefix = randomPrefix('stream');
  const started: RoleProcess[] = [];
  try {
    const mock = await startRole(
      'mock-llm',
      {
        MOCK_LLM_PORT: '0',
        MOCK_LLM_LATENCY_MS: `${o.latencyMs[0]}-${o.latencyMs[1]}`,
        MOCK_LLM_CHUNK_MS: String(o.chunkMs),
      },
      { timeoutMs: 60_000 },
    );
    started.push(mock);
    const common = {
      CHATLANE_PREFIX: prefix,
      LLM_BASE_URL: mock.url!,
      LLM_MODEL: 'mock',
      API_TOKEN,
      WEB_TOKEN_SECRET: WEB_SECRET,
      METRICS_TOKEN,
      ...o.env,
    };
    const workers: RoleProcess[] = [];
    for (let i = 0; i < o.workers; i++) {
      const w = await startRole(
        'worker',
        {
          ...common,
          REDIS_URL: o.workerRedisUrl ?? o.redisUrl,
          WORKER_CONCURRENCY: String(o.workerConcurrency),
        },
        { timeoutMs: 60_000, nodeArgs: o.workerNodeArgs ?? [] },
      );
      started.push(w);
      workers.push(w);
    }
    const ingresses: RoleProcess[] = [];
    for (let i = 0; i < o.ingresses; i++) {
      const p = await startRole(
        'ingress',
        { ...common, REDIS_URL: o.ingressRedisUrl ?? o.redisUrl },
        { timeoutMs: 60_000 },
      );
      started.push(p);
      ingresses.push(p);
    }
    // The client shares the bench process: drain the processes' logs without parsing them.
    for (const p of started) {
      p.child.stdout?.removeAllListeners('data');
      p.child.stdout?.resume();
      p.child.stderr?.removeAllListeners('data');
      p.child.stderr?.resume();
    }
    const mockBase = mock.url!.replace(/\/v1\/?$/, '');
    return {
      prefix,
      mock,
      mockBase,
      ingresses,
      workers,
      async control(body) {
        const res = await fetch(`${mockBase}/control`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        if (!res.ok) throw new Error(`mock /control: HTTP ${res.status} ${await res.text()}`);
      },
      async firstContent(chatKeyPrefix) {
        const res = await fetch(
          `${mockBase}/first-content?chatKeyPrefix=${encodeURIComponent(chatKeyPrefix)}`,
        );
        return ((await res.json()) as { firstContentAt: Record<string, number[]> }).firstContentAt;
      },
      async stop() {
        await Promise.allSettled(started.map((p) => p.kill('SIGKILL')));
      },
    };
  } catch (err) {
    await Promise.allSettled(started.map((p) => p.kill('SIGKILL')));
    throw err;
  }
}

/** Browser tokens for the chats (minted before a measurement, as an app's backend would). */
export async function webTokens(chatKeys: string[]): Promise<Map<string, string>> {
  const tokens = new Map<string, string>();
  await inBatches(chatKeys, 200, async (chatKey) => {
    tokens.set(chatKey, await mintWebToken(WEB_SECRET, chatKey));
  });
  return tokens;
}

/** RSS and V8 heap used of a process, from its `/metrics`. */
export async function processMemory(metricsBase: string): Promise<{ rss: number; heap: number }> {
  const text = await (
    await fetch(`${metricsBase}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
  ).text();
  const value = (name: string) => sampleValue(text, name) ?? Number.NaN;
  return { rss: value('process_resident_memory_bytes'), heap: value('nodejs_heap_size_used_bytes') };
}

export interface ProxyCounts {
  /** Bytes the role sent to Redis (its commands). */
  toRedis: number;
  /** Bytes Redis sent to the role (replies). */
  fromRedis: number;
  connections: number;
}

export interface CountingProxy {
  url: string;
  counts(): ProxyCounts;
  /** Local ports of the proxy's connections to Redis: MONITOR names a command's client by it. */
  upstreamPorts: Set<number>;
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of Redis for one role, counting the bytes each way: Redis 7.0 keeps
 * only server-wide byte totals, and the roles' traffic is interleaved in time.
 */
export async function countingProxy(redisPort: number): Promise<CountingProxy> {
  const counts: ProxyCounts = { toRedis: 0, fromRedis: 0, connections: 0 };
  const upstreamPorts = new Set<number>();
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    counts.connections++;
    const upstream = connect(redisPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    upstream.on('connect', () => {
      if (upstream.localPort) upstreamPorts.add(upstream.localPort);
    });
    client.on('data', (d: Buffer) => {
      counts.toRedis += d.length;
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      counts.fromRedis += d.length;
      client.write(d);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  const port = await new Promise<number>((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : 0);
    });
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    counts: () => ({ ...counts }),
    upstreamPorts,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Chats whose events stream holds a `turn.committed` among its newest entries. */
export async function committedChats(redis: Redis, prefix: string, chatKeys: string[]): Promise<number> {
  let done = 0;
  const p = redis.pipeline();
  for (const c of chatKeys) p.xrevrange(lazyChatKeys(prefix, c).events, '+', '-', 'COUNT', 10);
  for (const [, entries] of (await p.exec()) ?? []) {
    if ((entries as Array<[string, string[]]>).some(([, f]) => f[1] === 'turn.committed')) done++;
  }
  return done;
}
