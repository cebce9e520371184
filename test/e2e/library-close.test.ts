import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningMockLlm, startMockLlm } from '../../src/mock-llm/server.js';
import { startTestMcpServer, type TestMcpServer } from '../helpers/mcp-http-server.js';
import { freePort } from '../helpers/ports.js';
import { runToExit } from '../helpers/processes.js';
import { deleteLabel, REDIS_ENV, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * close() releases every handle a start opened — Redis connections (BullMQ's and the store's),
 * the ingress's server and its queues, the side server, the sweeper's timers, the MCP client,
 * the BullMQ workers of turns, compaction and delivery and the delivery senders — so a program
 * that started every role and called close() exits by itself, without process.exit.
 */

const INDEX = fileURLToPath(new URL('../../dist/index.js', import.meta.url));
const LABEL = 'library-close';
/** Longer than a clean shutdown takes on a loaded machine; a handle left open holds the process for good. */
const EXIT_WITHIN_MS = 45_000;

const PROGRAM = `
import { startChatlane } from ${JSON.stringify(INDEX)};
const lane = await startChatlane({ roles: ['ingress', 'worker', 'compactor', 'delivery'] });
const post = await fetch(lane.url + '/v1/chats/lib-close/messages', {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: 'm1', text: 'hello' }),
});
let items = [];
for (let i = 0; i < 300 && items.length === 0; i++) {
  await new Promise((r) => setTimeout(r, 100));
  items = (await (await fetch(lane.url + '/v1/chats/lib-close/outbox')).json()).items;
}
const health = await (await fetch(lane.metricsUrl + '/readyz')).json();
await lane.close();
console.log(JSON.stringify({ result: { posted: post.status, replies: items.map((i) => i.text), roles: lane.roles, mcp: health.mcp } }));
`;

/** A start that cannot reach Redis: it throws, and must leave nothing open behind it. */
const FAILING_PROGRAM = `
import { startChatlane } from ${JSON.stringify(INDEX)};
try {
  await startChatlane({ roles: ['ingress'] });
  console.log(JSON.stringify({ result: { started: true } }));
} catch (err) {
  console.log(JSON.stringify({ result: { failed: err.message } }));
}
`;

let dir: string;
let mock: RunningMockLlm;
let mcp: TestMcpServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chatlane-close-'));
  mock = await startMockLlm({ port: 0 });
  mcp = await startTestMcpServer();
  writeFileSync(join(dir, 'mcp.json'), JSON.stringify({ mcpServers: { remote: { url: mcp.url } } }));
  writeFileSync(join(dir, 'program.mjs'), PROGRAM);
  writeFileSync(join(dir, 'failing.mjs'), FAILING_PROGRAM);
});

afterAll(async () => {
  await mock?.close();
  await mcp?.close();
  rmSync(dir, { recursive: true, force: true });
  const redis = testRedis();
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

describe('a program that started every role', () => {
  it('answers through them, then exits by itself after close()', async () => {
    const exit = await runToExit(process.execPath, [join(dir, 'program.mjs')], {
      timeoutMs: EXIT_WITHIN_MS,
      env: {
        ...process.env,
        ...REDIS_ENV,
        CHATLANE_PREFIX: randomPrefix(LABEL),
        LLM_BASE_URL: mock.url,
        LLM_MODEL: 'mock',
        MCP_CONFIG: join(dir, 'mcp.json'),
        HOST: '127.0.0.1',
        PORT: '0',
        METRICS_PORT: '0',
        LOG_LEVEL: 'warn',
      },
    });
    const { out } = exit;
    const shown = `${exit.out}\n${exit.err}`;
    expect(exit.hung, `it did not exit by itself after close():\n${shown}`).toBe(false);
    expect(exit.code, shown).toBe(0);
    const line = out.split('\n').find((l) => l.startsWith('{"result"'));
    expect(line, shown).toBeDefined();
    expect(JSON.parse(line!).result).toMatchObject({
      posted: 202,
      replies: ['echo: hello'],
      roles: ['worker', 'compactor', 'delivery', 'ingress'],
      mcp: { remote: 'up' },
    });
  }, 90_000);

  it('a start that fails before the ingress listens (Redis unreachable) throws and leaves nothing open: the program exits by itself', async () => {
    const exit = await runToExit(process.execPath, [join(dir, 'failing.mjs')], {
      timeoutMs: EXIT_WITHIN_MS,
      env: {
        ...process.env,
        REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
        CHATLANE_PREFIX: randomPrefix(LABEL),
        HOST: '127.0.0.1',
        PORT: '0',
        LOG_LEVEL: 'fatal',
      },
    });
    const shown = `${exit.out}\n${exit.err}`;
    expect(exit.hung, `it did not exit by itself after the failed start:\n${shown}`).toBe(false);
    expect(exit.code, shown).toBe(0);
    expect(exit.out).toMatch(
      /"failed":"Redis at redis:\/\/127\.0\.0\.1:\d+ \(REDIS_URL\) did not answer within 10 s/,
    );
  }, 90_000);
});
