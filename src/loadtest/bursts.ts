import type { ChatState } from './chat-state.js';
import type { Schedule } from './schedule.js';
import { type Summary, summarize } from './stats.js';

/**
 * `--profile typing`: how the deployment met people typing in bursts (docs/lane-policies.md).
 * A burst's replies are those seen from its first message until the chat's next burst began:
 * in the closed loop a chat's next burst waits for every message before it to be answered, so
 * each reply falls in the window of the burst it answered. (In the open model bursts of a chat
 * may overlap, and a late reply counts for the next one.)
 */
export interface BurstReport {
  bursts: number;
  messagesPerBurst: number;
  /** Model requests of the run's chats per burst (with --mock-url: the mock counts them), else null. */
  modelCallsPerBurst: number | null;
  /** Replies (outbox items) per burst: `mean` is the figure, the rest its spread. */
  repliesPerBurst: Summary;
  /** Replies seen before their burst's last message was sent: answers given while the person still typed. */
  earlyReplies: number;
  /**
   * From a burst's last message (its send) to the reply that answered it: the first reply its
   * turn sent after the message was stored (verify.ts), what the person waits once done typing.
   */
  lastMessageToReplyMs: Summary;
  /** Bursts whose last message got no reply. */
  lastMessageUnanswered: number;
}

/** When each reply of the chat was seen (delivered to us, with the webhook transport), in order. */
function replyTimes(chat: ChatState): number[] {
  const times: number[] = [];
  for (const item of chat.outbox.values()) times.push(chat.deliveries.get(item.id)?.at ?? item.seenAt);
  return times.sort((a, b) => a - b);
}

/**
 * The report over every burst whose messages were all sent. `replySeenAt`: when each message's
 * reply was seen, by message id (verify.ts); `modelRequests`: the model requests of the run's
 * chats (the mock's counts), when known.
 */
export function burstReport(
  schedule: Schedule,
  chats: ChatState[],
  replySeenAt: ReadonlyMap<string, number>,
  modelRequests: number | undefined,
): BurstReport {
  const replies: number[] = [];
  const waits: number[] = [];
  let bursts = 0;
  let messages = 0;
  let early = 0;
  let unanswered = 0;
  for (const chat of chats) {
    const steps = schedule.chats[chat.index] ?? [];
    const times = replyTimes(chat);
    steps.forEach((step, i) => {
      const first = chat.messages[step.first]?.sentAt;
      const lastMessage = chat.messages[step.first + step.count - 1];
      const last = lastMessage?.sentAt;
      if (step.count < 2 || first === undefined || last === undefined) return;
      const next = steps[i + 1];
      const end = (next && chat.messages[next.first]?.sentAt) ?? Number.POSITIVE_INFINITY;
      const inWindow = times.filter((t) => t >= first && t < end);
      bursts++;
      messages += step.count;
      replies.push(inWindow.length);
      early += inWindow.filter((t) => t < last).length;
      const answeredAt = replySeenAt.get(lastMessage!.id);
      if (answeredAt === undefined) unanswered++;
      else waits.push(Math.max(0, answeredAt - last));
    });
  }
  return {
    bursts,
    messagesPerBurst: bursts > 0 ? Math.round((messages / bursts) * 100) / 100 : 0,
    modelCallsPerBurst:
      modelRequests === undefined || bursts === 0 ? null : Math.round((modelRequests / bursts) * 100) / 100,
    repliesPerBurst: summarize(replies, 2),
    earlyReplies: early,
    lastMessageToReplyMs: summarize(waits, 0),
    lastMessageUnanswered: unanswered,
  };
}
