import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { McpTools } from '../../src/worker/mcp/mcp-tools.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { userMessage } from '../helpers/messages.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';

/** The reference MCP server (a dev dependency), spawned over stdio like an operator would. */
const EVERYTHING = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url),
);
const settings = {
  toolTimeoutMs: 5000,
  resultMaxChars: 20_000,
  reconnectMs: 60_000,
  connectTimeoutMs: 15_000,
};
const everything = (allowTools?: string[]) =>
  new McpTools(
    {
      mcpServers: {
        everything: {
          command: process.execPath,
          args: [EVERYTHING, 'stdio'],
          ...(allowTools && { allowTools }),
        },
      },
    },
    settings,
    silentLogger(),
  );

describe('MCP tools over stdio (@modelcontextprotocol/server-everything)', () => {
  const redis = testRedis();
  const prefix = randomPrefix('mcpstdio');
  const allowed = everything(['echo', 'get-sum']);
  const all = everything();

  beforeAll(async () => {
    await Promise.all([allowed.start(), all.start()]);
  }, 30_000);
  afterAll(async () => {
    await Promise.all([allowed.close(), all.close()]);
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('names tools <server>__<tool> and offers only those in allowTools', () => {
    expect(Object.keys(all.tools())).toEqual(
      expect.arrayContaining(['everything__echo', 'everything__get-sum', 'everything__get-env']),
    );
    expect(Object.keys(all.tools()).length).toBeGreaterThan(2);
    expect(Object.keys(allowed.tools()).sort()).toEqual(['everything__echo', 'everything__get-sum']);
    expect(allowed.status()).toEqual({ everything: 'up' });
    expect(allowed.toolTokens()).toBeGreaterThan(0);
  });

  it('a turn calls a server tool and its result is a tool part of the committed assistant message', async () => {
    let offered: string[] = [];
    const { model, prompts } = scriptedModel((prompt, call, options) => {
      if (call === 0) offered = (options.tools ?? []).map((t) => t.name);
      if (call === 0) return { toolCalls: [{ name: 'everything__echo', input: { message: 'ping' } }] };
      if (call === 1) {
        const result = JSON.stringify(prompt.at(-1));
        return {
          toolCalls: [
            { name: 'chat_send', input: { text: result.includes('Echo: ping') ? 'pong' : 'no echo' } },
          ],
        };
      }
      return { text: '' };
    });
    const deps = { ...turnDeps(redis, prefix, model), mcp: allowed };
    await deps.store.ingest('c1', userMessage('c1', 'm1', 'echo ping please'), {
      maxPending: 100,
      dedupWindowMs: 60_000,
    });
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', consumed: 1 });

    const history: ChatMessage[] = await deps.store.readHistory('c1');
    const part = history.at(-1)!.parts.find((p) => p.type === 'dynamic-tool');
    expect(part).toMatchObject({
      toolName: 'everything__echo',
      state: 'output-available',
      input: { message: 'ping' },
    });
    expect(JSON.stringify((part as { output: unknown }).output)).toContain('Echo: ping');
    expect((await deps.store.readOutbox('c1', undefined, 10)).map((o) => o.text)).toEqual(['pong']);
    expect(prompts).toHaveLength(3);
    // The model was offered the allowed server tools next to chatlane's own, and no others.
    expect(offered).toEqual(expect.arrayContaining(['chat_send', 'everything__echo', 'everything__get-sum']));
    expect(offered.filter((n) => n.startsWith('everything__'))).toHaveLength(2);
  });
});
