import { z } from 'zod';
import { secretOf } from './config-auth.js';
import { int } from './config-values.js';

/**
 * Tool approval's variables (docs/approvals.md): which tools wait for a person, how long a
 * request stays open, what a new message does to an open one, and the key requests are signed
 * with. Spread into config.ts's schema.
 */

/** What a rule says of a tool's calls: a person approves each (`user`), none does (`auto`), or each is refused (`deny`). */
export type ApprovalMode = 'user' | 'auto' | 'deny';

/** One entry of TOOL_APPROVAL: a tool name, a prefix ending in `*` (`github__*`), or `*` alone. */
export interface ApprovalRule {
  pattern: string;
  mode: ApprovalMode;
}

/** A tool name, optionally ending in `*`; `*` alone is the default for the tools no other rule names. */
const PATTERN = /^(?:\*|[A-Za-z_][A-Za-z0-9_-]{0,63}\*?)$/;
const MODES: readonly ApprovalMode[] = ['user', 'auto', 'deny'];

/** `name=user|auto|deny`, comma-separated; a name given twice is refused. */
const rules = z
  .string()
  .optional()
  .transform((v, ctx): ApprovalRule[] => {
    const out: ApprovalRule[] = [];
    for (const raw of (v ?? '').split(',')) {
      const item = raw.trim();
      if (item === '') continue;
      const at = item.indexOf('=');
      const pattern = (at < 0 ? item : item.slice(0, at)).trim();
      const mode = (at < 0 ? '' : item.slice(at + 1)).trim().toLowerCase() as ApprovalMode;
      if (!PATTERN.test(pattern) || !MODES.includes(mode)) {
        ctx.addIssue({
          code: 'custom',
          message: `'${item}' is not tool=user|auto|deny (a tool name, a prefix ending in *, or * for every other tool)`,
        });
        continue;
      }
      if (out.some((r) => r.pattern === pattern)) {
        ctx.addIssue({ code: 'custom', message: `'${pattern}' is named twice` });
        continue;
      }
      out.push({ pattern, mode });
    }
    return out;
  });

export const toolApprovalShape = () => ({
  TOOL_APPROVAL: rules.describe(
    "which tool calls wait for a person: tool=user|auto|deny, comma-separated, e.g. exec_shell=user,github__create_issue=user,*=auto (a name, a prefix ending in *, or * for every other tool; chatlane's chat_* tools and skills_load only by name); unset: only tools that ask for approval themselves (needsApproval) wait",
  ),
  TOOL_APPROVAL_TTL_MS: int(86_400_000, 1000).describe(
    'how long a tool approval request stays open; then it is denied with reason expired and the model goes on',
  ),
  TOOL_APPROVAL_ON_MESSAGE: z
    .enum(['supersede', 'keep'])
    .default('supersede')
    .describe(
      "what a new user message does to the chat's open approval requests: supersede denies them (reason superseded) and the message is answered; keep answers the message and leaves them open",
    ),
  TOOL_APPROVAL_SECRET: secretOf(32).describe(
    "key that signs tool approval requests (HMAC, the AI SDK's experimental_toolApprovalSecret), at least 32 characters; unset: a random key kept in Redis, made by the first worker",
  ),
});

/** Chatlane's conversation tools: a `*` or prefix rule never covers them (a rule must name them). */
export function isConversationTool(name: string): boolean {
  return name.startsWith('chat_') || name === 'skills_load';
}

/**
 * The rule for `tool`: its exact name first, then the longest prefix rule, then `*` (not for
 * chatlane's conversation tools). Undefined when none applies.
 */
export function ruleFor(rules: readonly ApprovalRule[], tool: string): ApprovalMode | undefined {
  const exact = rules.find((r) => r.pattern === tool);
  if (exact) return exact.mode;
  if (isConversationTool(tool)) return undefined;
  let best: ApprovalRule | undefined;
  for (const r of rules) {
    if (r.pattern === '*' || !r.pattern.endsWith('*')) continue;
    const prefix = r.pattern.slice(0, -1);
    if (tool.startsWith(prefix) && (!best || prefix.length > best.pattern.length - 1)) best = r;
  }
  return best?.mode ?? rules.find((r) => r.pattern === '*')?.mode;
}

/** Problems between TOOL_APPROVAL and EXEC_SHELL (one line each, naming the variable to fix). */
export function toolApprovalProblems(config: {
  TOOL_APPROVAL: ApprovalRule[];
  EXEC_SHELL: 'off' | 'approve' | 'on';
}): string[] {
  if (config.EXEC_SHELL !== 'approve') return [];
  const said = config.TOOL_APPROVAL.find((r) => r.pattern === 'exec_shell');
  if (said && said.mode !== 'user')
    return [
      `  TOOL_APPROVAL: exec_shell=${said.mode} contradicts EXEC_SHELL=approve (every command waits for a person): drop it, or set EXEC_SHELL=on`,
    ];
  return [];
}

/** The rules a worker applies: EXEC_SHELL=approve is `exec_shell=user`, ahead of every other rule. */
export function effectiveRules(config: {
  TOOL_APPROVAL: ApprovalRule[];
  EXEC_SHELL: 'off' | 'approve' | 'on';
}): ApprovalRule[] {
  if (config.EXEC_SHELL !== 'approve') return config.TOOL_APPROVAL;
  return [
    { pattern: 'exec_shell', mode: 'user' },
    ...config.TOOL_APPROVAL.filter((r) => r.pattern !== 'exec_shell'),
  ];
}
