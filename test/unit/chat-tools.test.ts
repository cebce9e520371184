import { tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { countTextTokens } from '../../src/shared/tokens.js';
import { ChatTools, offeredTools } from '../../src/worker/agent/tools/chat-tools.js';
import { createExecShellTool } from '../../src/worker/agent/tools/exec-shell.js';
import { turnOf } from '../../src/worker/agent/tools/tool-turn.js';
import { DefaultAssembler } from '../../src/worker/pipeline/assembler.js';
import type { ChatToolName } from '../../src/worker/pipeline/chat-tool-names.js';
import { BUDGET_LINE } from '../../src/worker/pipeline/sections.js';

const fresh = { archived: 0, contexts: 0 };
const ALWAYS = ['chat_send', 'chat_memory_update', 'chat_context_new', 'chat_context_clear_active'];
const GUIDED: ChatToolName[] = ['chat_context_list', 'chat_context_load', 'chat_history_search'];

describe('offered tools', () => {
  it("offers a chat's first turn the same tools as its second: the tool list heads every request a prompt cache reuses", () => {
    expect(offeredTools(fresh)).toEqual(ALWAYS);
  });

  it('offers chat_context_list and chat_context_load once the chat has an archived context', () => {
    expect(offeredTools({ ...fresh, contexts: 1 })).toEqual([
      ...ALWAYS,
      'chat_context_list',
      'chat_context_load',
    ]);
  });

  it('offers chat_history_search once the archive holds something to search', () => {
    expect(offeredTools({ ...fresh, archived: 1 })).toEqual([...ALWAYS, 'chat_history_search']);
  });

  it('offers configured skills, contact send and MCP tools to every turn, and builds the set once', () => {
    const mcpTool = tool({ description: 'x', inputSchema: z.object({}), execute: async () => 'x' });
    const chatTools = new ChatTools({
      memoryMaxTokens: 100,
      contacts: {} as never,
      skillsTool: mcpTool,
    });
    const mcp = { srv__lookup: mcpTool };
    const first = chatTools.forTurn(fresh, mcp);
    expect([...first.active].sort()).toEqual(
      ['srv__lookup', 'skills_load', 'chat_contact_send', ...ALWAYS].sort(),
    );
    // Every tool of the process is in the set; the SDK sends the model only the active ones.
    expect(Object.keys(first.tools)).toHaveLength(10);
    const next = chatTools.forTurn({ archived: 1, contexts: 2 }, mcp);
    expect(next.tools).toBe(first.tools);
    expect(next.tools.chat_send).toBe(first.tools.chat_send);
    expect(next.active).toHaveLength(10);
  });

  it('offers exec_shell to every turn when EXEC_SHELL=on, and hands it the turn (its workspace)', () => {
    const execShellTool = createExecShellTool({
      timeoutMs: 30_000,
      outputMaxBytes: 16_384,
      workspaceMaxBytes: 8 * 1024 * 1024,
      hosts: ['pypi.org'],
    });
    const chatTools = new ChatTools({ memoryMaxTokens: 100, execShellTool });
    const turn = chatTools.forTurn(fresh);
    expect(turn.tools.exec_shell).toBe(execShellTool);
    expect(turn.active).toEqual(['exec_shell', ...ALWAYS]);
    expect(turn.withTurn).toEqual(['exec_shell', ...ALWAYS]);
    expect(execShellTool.description).toBe(
      "Run a shell command (bash -c) in /workspace, this chat's own directory, kept between turns (up to 8 MB). " +
        'Sandboxed: no network except HTTP(S) to pypi.org, read-only system, private /tmp, 30 s limit, ' +
        'output cut to 16384 bytes each. Returns exitCode, stdout, stderr.',
    );
    expect(new ChatTools({ memoryMaxTokens: 100 }).forTurn(fresh).active).not.toContain('exec_shell');
  });

  it('never lets an operator tool shadow one of chatlane’s own', () => {
    const impostor = tool({ description: 'evil', inputSchema: z.object({}), execute: async () => 'x' });
    const { tools, active } = new ChatTools({ memoryMaxTokens: 100 }).forTurn(fresh, { chat_send: impostor });
    expect(tools.chat_send).not.toBe(impostor);
    expect(active.filter((n) => n === 'chat_send')).toHaveLength(1);
  });

  it('hands the turn to the offered tools of chatlane only, never to an operator’s MCP tool or skills_load', () => {
    const other = tool({ description: 'x', inputSchema: z.object({}), execute: async () => 'x' });
    const chatTools = new ChatTools({ memoryMaxTokens: 100, contacts: {} as never, skillsTool: other });
    const { withTurn } = chatTools.forTurn({ ...fresh, archived: 1 }, { srv__lookup: other });
    expect(withTurn.sort()).toEqual(['chat_contact_send', 'chat_history_search', ...ALWAYS].sort());
  });

  it('offers the tools given in code to every turn, after chatlane’s own in the set, in the order given; none replaces one of ours', () => {
    const given = tool({ description: 'x', inputSchema: z.object({}), execute: async () => 'x' });
    const custom = { zeta: given, toString: given, chat_send: given, alpha: given };
    const chatTools = new ChatTools({ memoryMaxTokens: 100, custom });
    const first = chatTools.forTurn(fresh, { srv__lookup: given });
    const names = Object.keys(first.tools);
    expect(names.slice(0, 1)).toEqual(['srv__lookup']);
    expect(names.slice(-3)).toEqual(['zeta', 'toString', 'alpha']);
    expect(first.tools.chat_send).not.toBe(given);
    expect(first.custom).toEqual(['zeta', 'toString', 'alpha']);
    expect(first.active.slice(-3)).toEqual(['zeta', 'toString', 'alpha']);
    expect(first.withTurn).not.toContain('zeta');
    expect(chatTools.forTurn({ archived: 1, contexts: 1 }, { srv__lookup: given }).custom).toEqual(
      first.custom,
    );
  });

  it('fails a tool call that comes without its turn: a wiring bug, not a guess', () => {
    expect(() => turnOf({})).toThrow(/toolsContext/);
    expect(() => turnOf({ context: { chatKey: 'c1' } })).toThrow(/toolsContext/);
  });
});

describe('system prompt guidance follows the offered tools', () => {
  const context = { chatKey: 'c1' };
  const assembler = () => new DefaultAssembler({ maxSendsPerTurn: 5 });

  it('names no tool a fresh chat is not offered', () => {
    const system = assembler().systemPrompt({ ...context, offered: offeredTools(fresh) }, true);
    expect(system).toContain('`chat_context_new`');
    for (const name of GUIDED) expect(system).not.toContain(name);
    expect(system.endsWith(BUDGET_LINE)).toBe(true);
  });

  it('names exactly the tools offered', () => {
    const offered = offeredTools({ archived: 0, contexts: 1 });
    const system = assembler().systemPrompt({ ...context, offered }, true);
    expect(system).toContain('## Working context');
    for (const name of ['chat_context_new', 'chat_context_list', 'chat_context_load']) {
      expect(system).toContain(`\`${name}\``);
    }
    expect(system).not.toContain('chat_history_search');
    expect(system.endsWith(BUDGET_LINE)).toBe(true);
  });

  it('counts each variant of the static parts as what is sent', () => {
    const a = assembler();
    const variants = [fresh, { archived: 1, contexts: 0 }, { archived: 1, contexts: 3 }].map((facts) => ({
      ...context,
      offered: offeredTools(facts),
    }));
    const tokens = variants.map((c) => a.systemTokens(c));
    expect(tokens[0]).toBeLessThan(tokens[1]!);
    expect(tokens[1]).toBeLessThan(tokens[2]!);
    for (const [i, c] of variants.entries()) {
      // The per-turn sections are counted apart from the static ones: a token or two of seams.
      expect(Math.abs(tokens[i]! - countTextTokens(a.systemPrompt(c)))).toBeLessThanOrEqual(4);
    }
    // Counted once per variant: asking again gives the same count.
    expect(a.systemTokens(variants[2]!)).toBe(tokens[2]);
  });
});
