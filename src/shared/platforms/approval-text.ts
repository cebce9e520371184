import type { OutboxApproval } from '../store/records.js';

/**
 * A tool approval request on a chat platform in words (docs/approvals.md, "Chat platforms"):
 * the text of its outbox item, the ids and values of its card's buttons, and the "yes"/"no"
 * reply that answers it. No Chat SDK here: the worker writes the text and the ingress reads
 * answers without loading it; the card itself is approval-card.ts (delivery).
 */

// Short: Telegram's callback data holds 64 bytes, the action id and the approval id together.
export const APPROVE_ACTION = 'cl.approve';
export const DENY_ACTION = 'cl.deny';

/**
 * What a button carries back: the approval id, and the chat where the thread alone does not
 * name it (a Slack DM's click comes from the card's own thread). Telegram's callback data is
 * 64 bytes: its threads are its chats, so the id goes alone.
 */
export function actionValue(approvalId: string, chatKey: string, channel: string): string {
  return channel === 'telegram' ? approvalId : `${approvalId} ${chatKey}`;
}

export function parseActionValue(
  value: string | undefined,
): { approvalId: string; chatKey?: string } | undefined {
  const [approvalId, chatKey, ...rest] = (value ?? '').trim().split(' ');
  if (!approvalId || rest.length > 0) return undefined;
  return chatKey ? { approvalId, chatKey } : { approvalId };
}

/** The card once answered: what was asked and how it went, no buttons left. */
export function answeredCard(approval: Pick<OutboxApproval, 'tool'>, outcome: string): { markdown: string } {
  return { markdown: `${approval.tool}: ${outcome}` };
}

const SHOWN_CHARS = 1500;
const FENCE = '```';

/**
 * The request in words (Markdown), as its outbox item's text: what would run, and how to
 * answer where there are no buttons.
 */
export function approvalText(r: Pick<OutboxApproval, 'tool' | 'input' | 'reason'>): string {
  return [
    `Approve ${r.tool}?`,
    `${FENCE}\n${shownInput(r).replaceAll(FENCE, "'''")}\n${FENCE}`,
    ...(r.reason ? [r.reason] : []),
    'Reply yes to approve or no to deny.',
  ].join('\n');
}

/** What would run: a shell command as typed, anything else as its input's JSON (clipped). */
export function shownInput(approval: Pick<OutboxApproval, 'tool' | 'input'>): string {
  const command = (approval.input as { command?: unknown } | null)?.command;
  const shown =
    approval.tool === 'exec_shell' && typeof command === 'string'
      ? `$ ${command}`
      : JSON.stringify(approval.input ?? {});
  return shown.length > SHOWN_CHARS ? `${shown.slice(0, SHOWN_CHARS)}…` : shown;
}

const YES = new Set(['yes', 'y', 'approve', 'approved', 'ok', 'okay']);
const NO = new Set(['no', 'n', 'deny', 'denied']);

/** A reply that answers an open request in text: true for yes, false for no, undefined for anything else. */
export function yesOrNo(text: string): boolean | undefined {
  const word = text
    .trim()
    .toLowerCase()
    .replace(/[.!]+$/, '');
  if (YES.has(word)) return true;
  if (NO.has(word)) return false;
  return undefined;
}
