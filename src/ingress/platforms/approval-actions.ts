import type { ActionEvent } from 'chat';
import { isValidChatKey } from '../../shared/chat-key.js';
import type { Metrics } from '../../shared/metrics.js';
import {
  APPROVE_ACTION,
  answeredCard,
  DENY_ACTION,
  parseActionValue,
} from '../../shared/platforms/approval-text.js';
import type { EnabledPlatform } from '../../shared/platforms/platform.js';
import type { PlatformRuntime } from '../../shared/platforms/runtime.js';
import { requestScope } from '../../shared/platforms/scope.js';
import type { ApprovalRecord } from '../../shared/store/approvals.js';
import type { Approvals } from '../approvals.js';

/**
 * Answers to tool approval requests from chat platforms (docs/approvals.md, "Chat
 * platforms"): a card's Approve or Deny button (a signed platform webhook the adapter turns
 * into `chat.onAction`), or a "yes"/"no" reply while the chat has open requests. Only the
 * chat's own people answer: the users whose messages the requesting turn answered (any user
 * when the request names none). Outcomes go into the request scope, as messages' do, so a
 * failure to store an answer answers the webhook 5xx and the platform retries.
 */
export interface ApprovalActionDeps {
  runtime: PlatformRuntime;
  approvals: Approvals;
  metrics: Metrics;
}

/** Whether `userId` may answer `record` (the people it was asked of). */
export function mayAnswer(record: ApprovalRecord, userId: string | undefined): boolean {
  const { people } = record.request;
  return people.length === 0 || (userId !== undefined && people.includes(userId));
}

export function registerApprovalActions(deps: ApprovalActionDeps): void {
  deps.runtime.chat.onAction([APPROVE_ACTION, DENY_ACTION], async (event) => {
    const name = event.adapter.name;
    const platform = deps.runtime.platforms.get(name);
    const scope = requestScope.getStore();
    try {
      const outcome = platform ? await answerClick(deps, platform, event) : 'unsupported';
      deps.metrics.platformUpdates.inc({ platform: name, outcome });
      scope?.outcomes.push(outcome);
    } catch (err) {
      deps.metrics.platformUpdates.inc({ platform: name, outcome: 'failed' });
      scope?.errors.push(err);
      throw err;
    } finally {
      deps.runtime.forget(name, event.threadId);
    }
  });
}

async function answerClick(
  deps: ApprovalActionDeps,
  { module }: EnabledPlatform,
  event: ActionEvent,
): Promise<string> {
  const value = parseActionValue(event.value);
  if (!value) return 'ignored';
  const chatKey = value.chatKey ?? module.chatKey(event.threadId);
  if (!isValidChatKey(chatKey)) return 'ignored';
  const record = (await deps.approvals.read(chatKey, [value.approvalId])).get(value.approvalId);
  if (!record || !mayAnswer(record, event.user.userId)) return 'ignored';
  const approved = event.actionId === APPROVE_ACTION;
  const result = await deps.approvals.answer(chatKey, value.approvalId, {
    approved,
    by: `${module.name}:${event.user.userId}`,
    channel: module.name,
  });
  if (result.status !== 'accepted') return 'duplicate';
  // The buttons go: the card says how it was answered (best effort: the answer is stored).
  await event.adapter
    .editMessage(
      event.threadId,
      event.messageId,
      answeredCard(record.request, `${approved ? 'approved' : 'denied'} by ${event.user.userName}`),
    )
    .catch(() => undefined);
  return 'accepted';
}

/**
 * A "yes"/"no" reply from one of the chat's people while it has open requests: it answers
 * every one of them (they asked them all). Undefined when it answers none: the reply is then
 * an ordinary message.
 */
export async function answerByText(
  approvals: Approvals,
  chatKey: string,
  approved: boolean,
  from: { userId: string | undefined; platform: string },
): Promise<'accepted' | undefined> {
  const open = (await approvals.open(chatKey)).filter((r) => mayAnswer(r, from.userId));
  if (open.length === 0) return undefined;
  let stored = false;
  for (const r of open) {
    const result = await approvals.answer(chatKey, r.request.id, {
      approved,
      by: `${from.platform}:${from.userId ?? 'unknown'}`,
      channel: from.platform,
    });
    if (result.status === 'accepted' || result.status === 'answered') stored = true;
  }
  return stored ? 'accepted' : undefined;
}
