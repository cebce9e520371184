import type { Message, Thread } from 'chat';
import { isValidChatKey } from '../../shared/chat-key.js';
import type { ChatMessage } from '../../shared/messages.js';
import type { Metrics } from '../../shared/metrics.js';
import { yesOrNo } from '../../shared/platforms/approval-text.js';
import { escapeChatKeyPart } from '../../shared/platforms/chat-key.js';
import type { EnabledPlatform, GroupMode } from '../../shared/platforms/platform.js';
import type { PlatformRuntime } from '../../shared/platforms/runtime.js';
import { requestScope } from '../../shared/platforms/scope.js';
import type { Approvals } from '../approvals.js';
import type { Ingest } from '../ingest.js';
import { MAX_TEXT } from '../user-message.js';
import { answerByText, registerApprovalActions } from './approval-actions.js';

export type PlatformOutcome = 'accepted' | 'duplicate' | 'ignored' | 'unsupported';

export interface PlatformHandlerDeps {
  runtime: PlatformRuntime;
  ingest: Ingest;
  /** Tool approval answers: a card's buttons, and a yes/no reply while a request is open. */
  approvals?: Approvals;
  groupMode: GroupMode;
  metrics: Metrics;
}

/**
 * The Chat SDK handler of every platform: turns the adapter's normalized message into a user
 * UIMessage and calls THE ingest — nothing else (no model work, no reply). Registered for
 * direct messages, mentions and every other new message, so the group rule is ours.
 *
 * Its outcome goes into the request scope (the webhook route answers from it). An ingest
 * failure is recorded there and rethrown: the webhook answers 5xx, the poller retries the
 * update.
 */
export function registerPlatformHandler(deps: PlatformHandlerDeps): void {
  const handler = async (thread: Thread, message: Message) => {
    const name = thread.adapter.name;
    const platform = deps.runtime.platforms.get(name);
    const scope = requestScope.getStore();
    try {
      const outcome = platform ? await handleMessage(deps, platform, thread.id, message) : 'unsupported';
      deps.metrics.platformUpdates.inc({ platform: name, outcome });
      scope?.outcomes.push(outcome);
    } catch (err) {
      deps.metrics.platformUpdates.inc({ platform: name, outcome: 'failed' });
      scope?.errors.push(err);
      throw err;
    } finally {
      deps.runtime.forget(name, thread.id);
    }
  };
  const { chat } = deps.runtime;
  chat.onDirectMessage(handler);
  chat.onNewMention(handler);
  chat.onSubscribedMessage(handler);
  chat.onNewMessage(/[\s\S]*/, handler);
  if (deps.approvals)
    registerApprovalActions({ runtime: deps.runtime, approvals: deps.approvals, metrics: deps.metrics });
}

async function handleMessage(
  deps: PlatformHandlerDeps,
  { module }: EnabledPlatform,
  threadId: string,
  message: Message,
): Promise<PlatformOutcome> {
  if (module.unsupported?.(message)) return 'unsupported';
  if (deps.groupMode === 'mentions' && module.isGroup(message, threadId)) {
    const mentioned = module.isMention ? module.isMention(message) : message.isMention === true;
    if (!mentioned) return 'ignored';
  }
  const chatKey = module.chatKey(threadId);
  if (!isValidChatKey(chatKey))
    throw new Error(`platform ${module.name} mapped a thread to an invalid chatKey`);
  const text = [message.text, ...(module.notes?.(message) ?? [])].filter((t) => t.trim() !== '').join('\n');
  if (text === '') return 'unsupported';
  const facts = module.metadata(message, threadId);
  // "yes" or "no" while the chat has a request open for this person: the answer, not a message.
  const answer = deps.approvals ? yesOrNo(text) : undefined;
  if (answer !== undefined && deps.approvals) {
    const by = { userId: facts.userId, platform: module.name };
    const answered = await answerByText(deps.approvals, chatKey, answer, by);
    if (answered) return answered;
  }
  const id = `${module.name}:${escapeChatKeyPart(message.id)}`.slice(0, 200);
  const chatMessage: ChatMessage = {
    id,
    role: 'user',
    parts: [{ type: 'text', text: text.slice(0, MAX_TEXT) }],
    metadata: {
      ts: Date.now(),
      chatKey,
      kind: 'normal',
      channel: module.name,
      chatId: facts.chatId,
      threadId: facts.threadId,
      messageId: facts.messageId,
      ...(facts.userId !== undefined && { userId: facts.userId }),
      ...(facts.username !== undefined && { username: facts.username }),
      extra: { platform: module.name, chatType: facts.chatType, ...facts.extra },
    },
  };
  const result = await deps.ingest({
    chatKey,
    message: chatMessage,
    route: { channel: module.name, threadId },
  });
  return result.status;
}
