import type { UIMessage } from 'ai';
import type { ChatMessage } from '../../shared/messages.js';
import type { InboxEntry, UncommittedSend } from '../../shared/store/chat-store.js';
import { compareStreamIds } from '../../shared/stream-id.js';
import { withTokens } from '../../shared/tokens.js';

type Part = UIMessage['parts'][number];

/** What the model reads in the output of a reply an earlier, crashed run already sent. */
export const ALREADY_SENT_NOTE =
  'Sent before a restart interrupted this turn; the person has seen it. Do not send it again.';

/**
 * The newest inbox entry any earlier send had been answering, when it lies beyond `after`:
 * the crashed run had merged messages this turn's first read did not reach, and they must
 * be answered (and committed) before those sends, as the person saw them.
 */
export function seenBeyond(sends: UncommittedSend[], after: string): string | undefined {
  let max: string | undefined;
  for (const s of sends) {
    if (s.seen && compareStreamIds(s.seen, after) > 0 && (!max || compareStreamIds(s.seen, max) > 0)) {
      max = s.seen;
    }
  }
  return max;
}

export interface TurnMessages {
  /** Pending messages in inbox order, each group of earlier sends right after what it answered. */
  messages: ChatMessage[];
  /** Earlier sends answered every pending message: anything more the model says is extra. */
  answeredAll: boolean;
}

/**
 * Lay out a turn's pending messages together with what earlier runs of the chat sent and
 * never committed (a worker killed between `chat_send` and its commit). Each group becomes
 * an assistant message with the `chat_send` calls as they happened, placed after the last
 * pending message its run had seen when sending: the model reads them as its own replies
 * and continues, and the commit stores them once, where the person saw them.
 */
export async function withEarlierSends(
  pending: InboxEntry[],
  sends: UncommittedSend[],
  meta: { chatKey: string; runId: string; maxCharsPerMessage: number },
): Promise<TurnMessages> {
  const plain = pending.map((e) => e.message);
  if (sends.length === 0) return { messages: plain, answeredAll: false };

  // Index of the pending message each send follows (-1: before all of them).
  const slots = sends.map((s) => {
    let at = -1;
    pending.forEach((e, i) => {
      if (s.seen && compareStreamIds(e.streamId, s.seen) <= 0) at = i;
    });
    return at;
  });
  const groups: Array<{ at: number; sends: UncommittedSend[] }> = [];
  sends.forEach((s, i) => {
    const last = groups.at(-1);
    if (last && last.at === slots[i] && last.sends[0]!.runId === s.runId) last.sends.push(s);
    else groups.push({ at: slots[i]!, sends: [s] });
  });
  groups.sort((a, b) => a.at - b.at);

  let n = 0;
  const toMessage = (sent: UncommittedSend[]) =>
    withTokens(earlierMessage(sent, `${meta.runId}-e${n++}`, meta.chatKey), meta.maxCharsPerMessage);
  const messages: ChatMessage[] = [];
  for (const g of groups.filter((g) => g.at < 0)) messages.push(await toMessage(g.sends));
  for (const [i, message] of plain.entries()) {
    messages.push(message);
    for (const g of groups.filter((g) => g.at === i)) messages.push(await toMessage(g.sends));
  }
  return { messages, answeredAll: messages.at(-1)?.role === 'assistant' };
}

/**
 * One assistant message holding a crashed run's sends. `metadata.runId` stays the run that
 * sent them: history then names the run that wrote each outbox item.
 */
function earlierMessage(sends: UncommittedSend[], id: string, chatKey: string): ChatMessage {
  const parts = [
    { type: 'step-start' },
    ...sends.map((s) => ({
      type: 'tool-chat_send',
      toolCallId: `sent_${s.id}`,
      state: 'output-available',
      input: { text: s.text },
      output: { status: 'sent', id: s.id, note: ALREADY_SENT_NOTE },
    })),
  ] as unknown as Part[];
  return {
    id,
    role: 'assistant',
    parts,
    metadata: { ts: sends[0]!.ts, chatKey, runId: sends[0]!.runId, kind: 'normal' },
  };
}
