import type { Tool, ToolApprovalConfiguration, ToolApprovalStatus, ToolSet } from 'ai';
import { type ApprovalRule, ruleFor } from '../../../shared/config-tool-approval.js';

/**
 * Which calls wait for a person (docs/approvals.md, "Which calls wait"), as one AI SDK 7
 * `toolApproval` function, in this order:
 * 1. the program's own `toolApproval` (startChatlane's option, the AI SDK's type: a function
 *    or per-tool statuses), when it gives a status for the call;
 * 2. a TOOL_APPROVAL rule naming the tool, or a prefix rule (`github__*`);
 * 3. the tool's own `needsApproval` (a tool given in code may say so itself);
 * 4. TOOL_APPROVAL's `*` rule.
 * `chat_send` never waits: it is how the turn speaks, and the page shows it as text.
 *
 * The SDK asks again when an approved call is about to run: a status that has become `denied`
 * then refuses it.
 */
export type ToolApproval = ToolApprovalConfiguration<ToolSet, Record<string, unknown>>;

type GenericOptions = Parameters<Extract<ToolApproval, (...args: never[]) => unknown>>[0];

const STATUS_OF = { user: 'user-approval', auto: 'not-applicable', deny: 'denied' } as const;

/** The program's answer for the call, or undefined when it gives none. */
async function fromCode(code: ToolApproval | undefined, o: GenericOptions): Promise<ToolApprovalStatus> {
  if (!code) return undefined;
  if (typeof code === 'function') return code(o);
  const own = Object.hasOwn(code, o.toolCall.toolName) ? code[o.toolCall.toolName] : undefined;
  if (typeof own !== 'function') return own;
  return own(o.toolCall.input, {
    toolCallId: o.toolCall.toolCallId,
    messages: o.messages,
    toolContext: o.toolsContext?.[o.toolCall.toolName as keyof typeof o.toolsContext] as never,
    runtimeContext: o.runtimeContext,
  });
}

/** The tool's own needsApproval (true, false, or a function of the input), or undefined when it has none. */
async function fromTool(o: GenericOptions): Promise<ToolApprovalStatus> {
  const tool = o.tools?.[o.toolCall.toolName] as (Tool & { needsApproval?: unknown }) | undefined;
  const needs = tool?.needsApproval;
  if (needs == null) return undefined;
  const says =
    typeof needs === 'function'
      ? await (needs as (input: unknown, options: unknown) => unknown)(o.toolCall.input, {
          toolCallId: o.toolCall.toolCallId,
          messages: o.messages,
          context: o.toolsContext?.[o.toolCall.toolName as keyof typeof o.toolsContext],
        })
      : needs;
  return says ? 'user-approval' : 'not-applicable';
}

const given = (status: ToolApprovalStatus) => status !== undefined;

/**
 * The turn's `toolApproval`, or undefined when nothing can ever wait (no rule, no code hook:
 * a tool's own needsApproval is then read by the SDK itself).
 */
export function toolApprovalOf(
  rules: readonly ApprovalRule[],
  code?: ToolApproval,
): ToolApproval | undefined {
  if (rules.length === 0 && !code) return undefined;
  return async (o) => {
    const name = o.toolCall.toolName;
    if (name === 'chat_send') return 'not-applicable';
    const programs = await fromCode(code, o);
    if (given(programs)) return programs;
    const rule = ruleFor(
      rules.filter((r) => r.pattern !== '*'),
      name,
    );
    if (rule) return STATUS_OF[rule];
    const own = await fromTool(o);
    if (given(own)) return own;
    const fallback = ruleFor(rules, name);
    return fallback ? STATUS_OF[fallback] : 'not-applicable';
  };
}
