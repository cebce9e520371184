import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { prepareWorker } from '../../src/roles/worker.js';
import { ConfigError } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { loadMcpConfig } from '../../src/worker/mcp/mcp-config.js';
import { McpTools } from '../../src/worker/mcp/mcp-tools.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { startTestMcpServer, type TestMcpServer } from '../helpers/mcp-http-server.js';
import { userMessage } from '../helpers/messages.js';
import { freePort } from '../helpers/ports.js';
import { sampleValue } from '../helpers/prom.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';
import { workerConfig } from '../helpers/worker-config.js';

const settings = { toolTimeoutMs: 300, resultMaxChars: 2000, reconnectMs: 100, connectTimeoutMs: 2000 };
const limits = { maxPending: 100, dedupWindowMs: 60_000 };

/** The tool part of the committed assistant message for `toolName`. */
async function toolPart(deps: ReturnType<typeof turnDeps>, chatKey: string, toolName: string) {
  const history: ChatMessage[] = await deps.store.readHistory(chatKey);
  return history
    .flatMap((m) => m.parts)
    .find((p) => p.type === 'dynamic-tool' && (p as { toolName: string }).toolName === toolName) as
    | { state: string; errorText?: string; output?: unknown }
    | undefined;
}

/** The model calls `tool` once, then says what it got through chat_send. */
function callOnce(tool: string) {
  return scriptedModel((_prompt, call) => {
    if (call === 0) return { toolCalls: [{ name: tool, input: {} }] };
    if (call === 1) return { toolCalls: [{ name: 'chat_send', input: { text: `after ${tool}` } }] };
    return { text: '' };
  });
}

describe('MCP tools over Streamable HTTP (a server built with @modelcontextprotocol/sdk)', () => {
  const redis = testRedis();
  const prefix = randomPrefix('mcphttp');
  let server: TestMcpServer;
  let mcp: McpTools;

  beforeAll(async () => {
    server = await startTestMcpServer();
    mcp = new McpTools({ mcpServers: { remote: { url: server.url } } }, settings, silentLogger());
    await mcp.start();
  });
  afterAll(async () => {
    await mcp.close();
    await server.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('a tool that hangs past MCP_TOOL_TIMEOUT_MS is a tool error the model reads, and the turn commits', async () => {
    const { model, prompts } = callOnce('remote__hang');
    const deps = { ...turnDeps(redis, prefix, model), mcp };
    await deps.store.ingest('hang', userMessage('hang', 'm1', 'wait'), limits);
    expect(await runTurn(deps, 'hang')).toMatchObject({ status: 'done', consumed: 1, sent: 1 });
    const part = await toolPart(deps, 'hang', 'remote__hang');
    expect(part).toMatchObject({ state: 'output-error' });
    expect(part?.errorText).toContain('timed out after 300 ms');
    expect(JSON.stringify(prompts[1]!.at(-1))).toContain('timed out');
  });

  it('an isError result is a tool error, and a result over the cap is truncated with a note', async () => {
    const { model } = scriptedModel((_p, call) => {
      if (call === 0)
        return {
          toolCalls: [
            { name: 'remote__broken', input: {} },
            { name: 'remote__big', input: {} },
          ],
        };
      return { text: '' };
    });
    const deps = { ...turnDeps(redis, prefix, model), mcp };
    await deps.store.ingest('big', userMessage('big', 'm1', 'go'), limits);
    expect(await runTurn(deps, 'big')).toMatchObject({ status: 'done' });
    const broken = await toolPart(deps, 'big', 'remote__broken');
    expect(broken).toMatchObject({ state: 'output-error' });
    expect(broken?.errorText).toContain('database is on fire');
    const big = await toolPart(deps, 'big', 'remote__big');
    const stored = JSON.stringify(big?.output);
    expect(big?.state).toBe('output-available');
    expect(stored).toContain('[truncated by chatlane: the tool result was');
    expect(stored.length).toBeLessThan(2500);
  });

  it('a server absent at start: no tools, reported down; it is picked up once it comes', async () => {
    const port = await freePort();
    const seen: Array<[string, boolean]> = [];
    const late = new McpTools(
      { mcpServers: { late: { url: `http://127.0.0.1:${port}/mcp` } } },
      settings,
      silentLogger(),
      (name, up) => seen.push([name, up]),
    );
    let lateServer: TestMcpServer | undefined;
    try {
      await late.start();
      expect(late.tools()).toEqual({});
      expect(late.status().late).toMatch(/^down: /);
      expect(seen).toContainEqual(['late', false]);
      lateServer = await startTestMcpServer(port);
      await waitFor(async () => 'late__lookup' in late.tools(), { what: 'reconnect' });
      expect(late.status()).toEqual({ late: 'up' });
      expect(seen.at(-1)).toEqual(['late', true]);
    } finally {
      await late.close();
      await late.close();
      await lateServer?.close();
    }
  });

  it('a server that dies mid-turn fails that call as a tool error, the turn commits, the server is marked down', async () => {
    const dying = await startTestMcpServer();
    const tools = new McpTools(
      { mcpServers: { dying: { url: dying.url } } },
      { ...settings, toolTimeoutMs: 1000, reconnectMs: 60_000 },
      silentLogger(),
    );
    try {
      await tools.start();
      const { model } = callOnce('dying__die');
      const deps = { ...turnDeps(redis, prefix, model), mcp: tools };
      await deps.store.ingest('die', userMessage('die', 'm1', 'go'), limits);
      expect(await runTurn(deps, 'die')).toMatchObject({ status: 'done', sent: 1 });
      expect(await toolPart(deps, 'die', 'dying__die')).toMatchObject({ state: 'output-error' });
      await waitFor(async () => tools.status().dying?.startsWith('down'), { what: 'marked down' });
      expect(tools.tools()).toEqual({});
    } finally {
      await tools.close();
    }
  });
});

describe('MCP in the worker process', () => {
  const redis = testRedis();
  const prefix = randomPrefix('mcpwork');
  const dir = mkdtempSync(join(tmpdir(), 'chatlane-mcp-'));
  let mock: Awaited<ReturnType<typeof startMockLlm>>;
  beforeAll(async () => {
    mock = await startMockLlm({ port: 0 });
  });
  afterAll(async () => {
    await mock.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });
  const config = (mcpConfig: string) =>
    workerConfig(prefix, mock.url, {
      MCP_CONFIG: mcpConfig,
      MCP_RECONNECT_MS: '100',
      MCP_CONNECT_TIMEOUT_MS: '2000',
    });

  it('a bad MCP_CONFIG stops the worker naming the field', async () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ mcpServers: { files: { command: 'x', allowtools: ['a'] } } }));
    await expect(prepareWorker(config(bad), silentLogger())).rejects.toThrow(ConfigError);
    expect(() => loadMcpConfig(bad)).toThrow(/mcpServers\.files/);
    writeFileSync(bad, JSON.stringify({ mcpServers: { 'a b': { url: 'http://x' } } }));
    expect(() => loadMcpConfig(bad)).toThrow(/server names/);
  });

  it('starts ready with a server down (readyz detail, metric 0) and reconnects in the background', async () => {
    const port = await freePort();
    const file = join(dir, 'mcp.json');
    writeFileSync(file, JSON.stringify({ mcpServers: { remote: { url: `http://127.0.0.1:${port}/mcp` } } }));
    const worker = await (await prepareWorker(config(file), silentLogger())).run();
    let server: TestMcpServer | undefined;
    try {
      const ready = await fetch(`${worker.metricsUrl}/readyz`);
      expect(ready.status).toBe(200);
      expect(((await ready.json()) as { mcp: Record<string, string> }).mcp.remote).toMatch(/^down: /);
      const metrics = await (await fetch(`${worker.metricsUrl}/metrics`)).text();
      expect(sampleValue(metrics, 'chatlane_mcp_server_up', { server: 'remote' })).toBe(0);

      server = await startTestMcpServer(port);
      await waitFor(
        async () => {
          const body = (await (await fetch(`${worker.metricsUrl}/readyz`)).json()) as {
            mcp: Record<string, string>;
          };
          return body.mcp.remote === 'up';
        },
        { what: 'reconnect' },
      );
      const after = await (await fetch(`${worker.metricsUrl}/metrics`)).text();
      expect(sampleValue(after, 'chatlane_mcp_server_up', { server: 'remote' })).toBe(1);
    } finally {
      await worker.close();
      await server?.close();
    }
  });
});
