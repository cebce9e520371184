import { type Tool, type ToolSet, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, loadConfig } from '../../src/shared/config.js';
import { effectiveRules, ruleFor } from '../../src/shared/config-tool-approval.js';
import { type ToolApproval, toolApprovalOf } from '../../src/worker/agent/approval/rules.js';

function configErrorOf(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError, nothing was thrown');
}

const plain = tool({ inputSchema: z.object({}), execute: async () => 'ok' });
const asking = { ...plain, needsApproval: true } as Tool;
const tools: ToolSet = {
  exec_shell: plain,
  github__create_issue: plain,
  github__list_issues: plain,
  lookup: plain,
  refund: asking,
  chat_send: plain,
  chat_memory_update: plain,
};

/** What the turn's toolApproval says of one call of `name`. */
async function statusOf(approval: ToolApproval | undefined, name: string, input: unknown = {}) {
  if (typeof approval !== 'function') throw new Error('expected a function');
  return approval({
    toolCall: { type: 'tool-call', toolCallId: 'c1', toolName: name, input } as never,
    tools,
    toolsContext: {},
    runtimeContext: {},
    messages: [],
  });
}

describe('TOOL_APPROVAL', () => {
  it('reads tool=user|auto|deny rules: names, prefixes ending in *, and * for every other tool', () => {
    const config = loadConfig({
      TOOL_APPROVAL: 'exec_shell=user, github__*=deny,github__list_issues=auto,*=auto',
    });
    expect(config.TOOL_APPROVAL).toEqual([
      { pattern: 'exec_shell', mode: 'user' },
      { pattern: 'github__*', mode: 'deny' },
      { pattern: 'github__list_issues', mode: 'auto' },
      { pattern: '*', mode: 'auto' },
    ]);
    expect(config.TOOL_APPROVAL_TTL_MS).toBe(86_400_000);
    expect(config.TOOL_APPROVAL_ON_MESSAGE).toBe('supersede');
  });

  it.each([
    ['exec_shell=maybe', "'exec_shell=maybe' is not tool=user|auto|deny"],
    ['exec_shell', "'exec_shell' is not tool=user|auto|deny"],
    ['exec shell=user', "'exec shell=user' is not tool=user|auto|deny"],
    ['a*b=user', "'a*b=user' is not tool=user|auto|deny"],
    ['lookup=user,lookup=auto', "'lookup' is named twice"],
  ])('refuses %j naming TOOL_APPROVAL', (value, said) => {
    expect(configErrorOf({ TOOL_APPROVAL: value })).toContain(`  TOOL_APPROVAL: ${said}`);
  });

  it('refuses TOOL_APPROVAL_ON_MESSAGE other than supersede or keep, and a TTL under a second', () => {
    expect(configErrorOf({ TOOL_APPROVAL_ON_MESSAGE: 'wait' })).toMatch(/^ {2}TOOL_APPROVAL_ON_MESSAGE: /m);
    expect(configErrorOf({ TOOL_APPROVAL_TTL_MS: '10' })).toMatch(/^ {2}TOOL_APPROVAL_TTL_MS: /m);
    expect(configErrorOf({ TOOL_APPROVAL_SECRET: 'short' })).toMatch(
      /^ {2}TOOL_APPROVAL_SECRET: must be at least 32 characters$/m,
    );
  });

  it('EXEC_SHELL=approve is exec_shell=user ahead of every rule; exec_shell=auto beside it is refused', () => {
    const config = loadConfig({ EXEC_SHELL: 'approve', TOOL_APPROVAL: '*=auto' });
    expect(effectiveRules(config)).toEqual([
      { pattern: 'exec_shell', mode: 'user' },
      { pattern: '*', mode: 'auto' },
    ]);
    expect(configErrorOf({ EXEC_SHELL: 'approve', TOOL_APPROVAL: 'exec_shell=auto' })).toContain(
      '  TOOL_APPROVAL: exec_shell=auto contradicts EXEC_SHELL=approve',
    );
  });

  it('picks the exact name, then the longest prefix, then *; * and prefixes never cover chat_* or skills_load', () => {
    const rules = loadConfig({
      TOOL_APPROVAL: 'github__*=deny,github__list*=auto,lookup=user,*=user',
    }).TOOL_APPROVAL;
    expect(ruleFor(rules, 'lookup')).toBe('user');
    expect(ruleFor(rules, 'github__create_issue')).toBe('deny');
    expect(ruleFor(rules, 'github__list_issues')).toBe('auto');
    expect(ruleFor(rules, 'exec_shell')).toBe('user');
    expect(ruleFor(rules, 'chat_memory_update')).toBeUndefined();
    expect(ruleFor(rules, 'skills_load')).toBeUndefined();
    expect(
      ruleFor(loadConfig({ TOOL_APPROVAL: 'chat_memory_update=user' }).TOOL_APPROVAL, 'chat_memory_update'),
    ).toBe('user');
  });
});

describe("the turn's toolApproval", () => {
  it('is none without rules or code: the SDK then reads needsApproval itself', () => {
    expect(toolApprovalOf([])).toBeUndefined();
  });

  it('asks a person by rule, lets the tool speak for itself before *, and never asks for chat_send', async () => {
    const approval = toolApprovalOf(
      loadConfig({ TOOL_APPROVAL: 'exec_shell=user,github__*=deny,*=auto' }).TOOL_APPROVAL,
    );
    expect(await statusOf(approval, 'exec_shell')).toBe('user-approval');
    expect(await statusOf(approval, 'github__create_issue')).toBe('denied');
    expect(await statusOf(approval, 'lookup')).toBe('not-applicable');
    // The tool's own needsApproval is more specific than `*`.
    expect(await statusOf(approval, 'refund')).toBe('user-approval');
    const everything = toolApprovalOf(loadConfig({ TOOL_APPROVAL: '*=user' }).TOOL_APPROVAL);
    expect(await statusOf(everything, 'chat_send')).toBe('not-applicable');
    expect(await statusOf(everything, 'chat_memory_update')).toBe('not-applicable');
    expect(
      await statusOf(
        toolApprovalOf(loadConfig({ TOOL_APPROVAL: 'chat_send=user' }).TOOL_APPROVAL),
        'chat_send',
      ),
    ).toBe('not-applicable');
  });

  it("asks the program's own toolApproval first, function or per tool, and falls back to the rules when it says nothing", async () => {
    const rules = loadConfig({ TOOL_APPROVAL: 'lookup=user' }).TOOL_APPROVAL;
    const byFunction = toolApprovalOf(rules, ({ toolCall }) =>
      (toolCall.input as { amount?: number }).amount! > 100
        ? { type: 'user-approval', reason: 'over 100' }
        : undefined,
    );
    expect(await statusOf(byFunction, 'refund', { amount: 500 })).toEqual({
      type: 'user-approval',
      reason: 'over 100',
    });
    expect(await statusOf(byFunction, 'lookup', { amount: 5 })).toBe('user-approval');
    const perTool = toolApprovalOf(rules, {
      lookup: 'approved',
      refund: (input: unknown) => ((input as { amount: number }).amount > 100 ? 'user-approval' : 'approved'),
    });
    expect(await statusOf(perTool, 'lookup')).toBe('approved');
    expect(await statusOf(perTool, 'refund', { amount: 5 })).toBe('approved');
    expect(await statusOf(perTool, 'refund', { amount: 500 })).toBe('user-approval');
    expect(await statusOf(perTool, 'exec_shell')).toBe('not-applicable');
  });
});
