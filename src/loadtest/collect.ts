import type { ChatlaneApi, HistoryMessage } from './api.js';
import type { ChatState } from './chat-state.js';
import type { ChatEvidence } from './verify.js';

/**
 * After the run: read what each chat ended up with — the rest of its events and outbox,
 * its history and pending messages, and the archived originals when compaction summarised
 * part of it — through the same public API, a bounded number of chats at a time.
 */

const PAGE = 1000;

function isSummary(m: HistoryMessage): boolean {
  return m.metadata?.kind === 'summary';
}

async function evidenceOf(api: ChatlaneApi, chat: ChatState, now: () => number): Promise<ChatEvidence> {
  if (chat.firstSentAt === undefined) {
    // Never sent to (the duration cut it): nothing to read, nothing to check.
    return {
      key: chat.key,
      messages: chat.messages,
      sequence: [],
      pending: [],
      outbox: [],
      commits: [],
      firstSentAt: undefined,
    };
  }
  for (;;) {
    const page = await api.events(chat.key, chat.eventsCursor, PAGE);
    chat.applyEvents(page.items);
    if (page.items.length < PAGE) break;
  }
  for (;;) {
    const page = await api.outbox(chat.key, chat.outboxCursor, PAGE);
    chat.applyOutbox(page.items, now());
    if (page.items.length < PAGE) break;
  }
  const { messages, pending } = await api.messages(chat.key);
  let sequence = messages.filter((m) => !isSummary(m));
  if (messages.some(isSummary)) {
    // Compaction moved the oldest originals to the archive (summaries are not originals).
    const archived = (await api.archive(chat.key))
      .filter((a) => a.kind === 'compaction')
      .flatMap((a) => a.messages.filter((m) => !isSummary(m)));
    sequence = [...archived, ...sequence];
  }
  return {
    key: chat.key,
    messages: chat.messages,
    sequence,
    pending,
    outbox: [...chat.outbox.values()],
    commits: chat.commits,
    firstSentAt: chat.firstSentAt,
    ...(chat.expectDeliveries && { deliveries: chat.deliveries }),
  };
}

export async function collectEvidence(
  api: ChatlaneApi,
  chats: ChatState[],
  concurrency: number,
  now: () => number,
): Promise<ChatEvidence[]> {
  const out: ChatEvidence[] = new Array(chats.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, chats.length) }, async () => {
      while (next < chats.length) {
        const i = next++;
        out[i] = await evidenceOf(api, chats[i]!, now);
      }
    }),
  );
  return out;
}
