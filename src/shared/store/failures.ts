import type { MessageFailureCode } from '../errors.js';
import type { ChatMessage } from '../messages.js';
import { storedJson } from '../storable.js';
import type { CallUsage } from '../usage.js';
import { type ChatStore, type FencedResult, fencedRefusal, tokensOf, tuple } from './chat-store.js';
import { scripts } from './scripts.js';

export interface FailedBatch {
  runId: string;
  /** Inbox stream ids of the messages that failed. */
  consumed: string[];
  /** Those messages, already marked (`markFailed`), in inbox order. */
  messages: ChatMessage[];
  notice: string;
  ts: number;
  code: MessageFailureCode;
  /** Merged into the turn.failed event (the error, the worker ...). */
  event: Record<string, unknown>;
  /** The failed turn's model calls (billed all the same): counted and put on turn.failed. */
  usage?: CallUsage[];
}

/** A message as it is kept after failing: whole, with `metadata.failed` and the reason. */
export function markFailed(message: ChatMessage, code: MessageFailureCode, detail: string): ChatMessage {
  const { tokens: _tokens, tokensMaxChars: _max, ...metadata } = message.metadata;
  return {
    ...message,
    // Counted again on its failed view (model-view.ts): the model sees a marker, not the content.
    metadata: { ...metadata, failed: true, failure: { code, detail: detail.slice(0, 500) } },
  };
}

/**
 * The fenced write of a failed batch (fail.lua): inbox entries consumed, the messages in
 * history, the notice in the outbox and `turn.failed`, atomically. `missing` means another
 * attempt already failed (or answered) this batch: nothing was written, no second notice.
 */
export async function failBatch(
  store: ChatStore,
  chatKey: string,
  fence: string,
  batch: FailedBatch,
): Promise<FencedResult<{ id: string; routed: boolean }>> {
  const k = store.keys(chatKey);
  const raw = tuple.parse(
    await scripts.fail.run(
      store.redis,
      [k.meta, k.hist, k.inbox, k.events, k.outbox, k.uncommitted, k.usage],
      [
        fence,
        store.maxEvents,
        store.retention.outboxKeep,
        batch.runId,
        batch.notice,
        batch.ts,
        tokensOf(batch.messages),
        storedJson({ ...batch.event, reason: batch.code }, { tooDeep: 'clip' }),
        ...store.usageArgs(batch.usage),
        batch.consumed.length,
        ...batch.consumed,
        ...batch.messages.map((m) => storedJson(m, { tooDeep: 'clip' })),
      ],
      store.events,
    ),
  );
  if (raw[0] === 'ok') return { ok: true, id: String(raw[1]), routed: Number(raw[2]) === 1 };
  return fencedRefusal(raw);
}
