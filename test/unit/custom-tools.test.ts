import { type Tool, type ToolSet, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../src/shared/config.js';
import {
  chatlaneToolContextSchema,
  checkToolNames,
  checkTools,
} from '../../src/worker/agent/tools/custom-tools.js';

const t = (): Tool => tool({ description: 'x', inputSchema: z.object({}), execute: async () => 'ok' });
const named = (...names: string[]): ToolSet => Object.fromEntries(names.map((n) => [n, t()]));
const none = { mcpServers: [] as string[] };

/** The ConfigError `checkToolNames` throws for `names`, or undefined when it accepts them. */
function refusal(names: string[], reserved = none): ConfigError | undefined {
  try {
    checkToolNames(named(...names), reserved);
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
}

describe('checkToolNames', () => {
  it('accepts names every provider takes: a letter or _, then letters, digits, _ and -, up to 64', () => {
    expect(refusal(['lookup_order', 'a', '_private', 'Refund-v2', `a${'b'.repeat(63)}`])).toBeUndefined();
  });

  it.each([
    ['', 'empty'],
    [`a${'b'.repeat(64)}`, 'longer than 64'],
    ['1lookup', 'starting with a digit (Gemini)'],
    ['-lookup', 'starting with a dash (Gemini)'],
    ['orders.lookup', 'a dot (OpenAI, Anthropic)'],
    ['orders:lookup', 'a colon (OpenAI, Anthropic)'],
    ['look up', 'a space'],
    ['café', 'a letter outside A–Z'],
  ])('refuses %j (%s), naming it and the rule', (name) => {
    const err = refusal([name]);
    expect(err?.message).toContain(JSON.stringify(name));
    expect(err?.message).toMatch(/every provider accepts/);
  });

  it.each(['chat_send', 'chat_history_search', 'chat_anything', 'CHAT_Send'])(
    'refuses %j: chat_* is reserved for chatlane’s own tools',
    (name) => {
      expect(refusal([name])?.message).toMatch(new RegExp(`"${name}" clashes with chatlane's own tools`));
    },
  );

  it.each(['skills_load', 'exec_shell', 'Skills_Load'])('refuses %j: a built-in tool', (name) => {
    expect(refusal([name])?.message).toContain(`"${name}" is the name of one of chatlane's own tools`);
  });

  it('refuses the <server>__<tool> form: naming the configured MCP server it clashes with, and reserved for any other', () => {
    expect(refusal(['tickets__lookup'], { mcpServers: ['tickets'] })?.message).toContain(
      '"tickets__lookup" clashes with the tools of MCP server "tickets"',
    );
    expect(refusal(['later__lookup'], { mcpServers: ['tickets'] })?.message).toContain(
      '"later__lookup" contains "__", which is reserved for MCP tools',
    );
  });

  it('names every refused tool in one error, and none of the accepted ones', () => {
    const message = refusal(['ok_tool', 'chat_send', '9lives'])?.message ?? '';
    expect(message).toContain('"chat_send"');
    expect(message).toContain('"9lives"');
    expect(message).not.toContain('ok_tool');
  });
});

describe('checkTools', () => {
  it('refuses a tool without execute: chatlane runs every tool itself', async () => {
    const clientSide = { lookup: tool({ description: 'x', inputSchema: z.object({}) }) } as ToolSet;
    await expect(checkTools(clientSide, none)).rejects.toThrow(/"lookup" has no execute/);
  });

  it('takes a tool that needs approval: its calls wait for a person', async () => {
    const approval = { refund: { ...t(), needsApproval: true } } as ToolSet;
    await expect(checkTools(approval, none)).resolves.toBeUndefined();
  });

  it("refuses a contextSchema requiring what a chat's context never has, naming the tool and the key", async () => {
    const tenant = {
      tenant_lookup: tool({
        inputSchema: z.object({}),
        contextSchema: z.object({ chatKey: z.string(), tenantId: z.string() }),
        execute: async () => 'x',
      }),
    };
    await expect(checkTools(tenant, none)).rejects.toThrow(
      /"tenant_lookup" has a contextSchema requiring tenantId/,
    );
  });

  it("accepts chatlane's own context schema, a schema asking for part of the context, and one it cannot read (checked per call)", async () => {
    const tools = {
      typed: tool({
        inputSchema: z.object({}),
        contextSchema: chatlaneToolContextSchema,
        execute: async () => 1,
      }),
      partial: tool({
        inputSchema: z.object({}),
        contextSchema: z.object({ chatKey: z.string().startsWith('shop:') }),
        execute: async () => 1,
      }),
      opaque: tool({
        inputSchema: z.object({}),
        contextSchema: z.object({ once: z.custom<(k: string) => void>((v) => typeof v === 'function') }),
        execute: async () => 1,
      }),
    };
    await expect(checkTools(tools, none)).resolves.toBeUndefined();
  });

  it('checks the names too', async () => {
    await expect(checkTools(named('chat_send'), none)).rejects.toThrow(ConfigError);
  });
});
