import type { Config } from '../../../shared/config.js';
import { effectiveRules } from '../../../shared/config-tool-approval.js';
import type { Metrics } from '../../../shared/metrics.js';
import { sharedApprovalSecret } from '../../../shared/store/approvals.js';
import type { ChatStore } from '../../../shared/store/chat-store.js';
import { type ToolApproval, toolApprovalOf } from './rules.js';

/** What a turn needs for tool approval (docs/approvals.md). */
export interface ApprovalDeps {
  /** Which calls wait for a person (rules.ts); undefined: only tools that say so themselves. */
  toolApproval: ToolApproval | undefined;
  /** TOOL_APPROVAL_TTL_MS. */
  ttlMs: number;
  /** TOOL_APPROVAL_ON_MESSAGE. */
  onMessage: 'supersede' | 'keep';
  /** The key requests are signed with (TOOL_APPROVAL_SECRET, or the one kept in Redis). */
  secret: () => Promise<string>;
  /**
   * Asks for the chat's turn at a request's expiry (a delayed turn job), before the request is
   * committed: no request is ever without the turn that expires it. Absent: expiry waits for
   * the chat's next turn.
   */
  expire?: (chatKey: string, approvalId: string, atMs: number) => Promise<void>;
  /** chatlane_tool_approvals_total. */
  metrics?: Pick<Metrics, 'toolApprovals'>;
}

/** The worker's approval settings from its configuration and the program's own `toolApproval`. */
export function approvalDepsOf(
  config: Pick<
    Config,
    | 'TOOL_APPROVAL'
    | 'EXEC_SHELL'
    | 'TOOL_APPROVAL_TTL_MS'
    | 'TOOL_APPROVAL_ON_MESSAGE'
    | 'TOOL_APPROVAL_SECRET'
  >,
  store: ChatStore,
  code: ToolApproval | undefined,
  metrics?: Pick<Metrics, 'toolApprovals'>,
): ApprovalDeps {
  const configured = config.TOOL_APPROVAL_SECRET;
  let shared: Promise<string> | undefined;
  return {
    toolApproval: toolApprovalOf(effectiveRules(config), code),
    ttlMs: config.TOOL_APPROVAL_TTL_MS,
    onMessage: config.TOOL_APPROVAL_ON_MESSAGE,
    secret: () => {
      if (configured) return Promise.resolve(configured);
      shared ??= sharedApprovalSecret(store).catch((err: unknown) => {
        shared = undefined;
        throw err;
      });
      return shared;
    },
    ...(metrics && { metrics }),
  };
}
