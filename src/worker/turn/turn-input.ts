import { type ChatMessage, isSummary } from '../../shared/messages.js';
import { answerOf } from '../../shared/store/approvals.js';
import type { ChatStore, InboxEntry } from '../../shared/store/chat-store.js';
import { compareStreamIds } from '../../shared/stream-id.js';
import { withTokens } from '../../shared/tokens.js';
import { addLinks, markSpan, type Span, traceparent } from '../../shared/tracing/spans.js';
import { seenBeyond } from '../agent/earlier-sends.js';
import { type ToolContextTurn, toolContext } from '../agent/tools/custom-tools.js';
import type { ToolTurn } from '../agent/tools/tool-turn.js';
import type { ChatToolName } from '../pipeline/chat-tool-names.js';
import type { ProviderResult, RuntimeContext } from '../pipeline/types.js';
import type { Lane } from './lane.js';

// What a turn reads and builds around its input: helpers of turn.ts.

/**
 * Messages merged into the running turn: the turn links to each, and each message's own trace
 * gets a span that links back to the turn (a link is seen from both of its traces).
 */
export function linkMerged(span: Span | undefined, merged: InboxEntry[]): void {
  if (!span || merged.length === 0) return;
  const messages = merged.map((e) => e.message.metadata.traceparent);
  addLinks(span, messages);
  const turn = traceparent(span);
  for (const parent of messages) {
    if (parent) markSpan('chatlane.message.merged', { parent, links: [turn] });
  }
}

/**
 * The pending messages a crashed earlier run had answered must all be in this turn: when it
 * had merged beyond this turn's first read, read on up to the last one its sends had seen.
 */
export async function reachEarlierSends(
  deps: { store: ChatStore; settings: { maxMerges: number; maxCharsPerMessage: number } },
  lane: Pick<Lane, 'chatKey' | 'uncommitted'>,
  pending: InboxEntry[],
): Promise<InboxEntry[]> {
  const until = seenBeyond(lane.uncommitted, pending.at(-1)!.streamId);
  if (!until) return pending;
  const out = [...pending];
  for (;;) {
    const more = await deps.store.readInbox(lane.chatKey, deps.settings.maxMerges + 1, out.at(-1)!.streamId);
    // An approval answer is never merged (approval/plan.ts): the messages stop before it.
    const answerAt = more.findIndex((e) => answerOf(e.message) !== undefined);
    if (answerAt >= 0) more.splice(answerAt);
    const within = more.filter((e) => compareStreamIds(e.streamId, until) <= 0);
    for (const e of within)
      out.push({
        streamId: e.streamId,
        message: await withTokens(e.message, deps.settings.maxCharsPerMessage),
      });
    if (within.length < more.length || more.length === 0) return out;
  }
}

/** What the system prompt's runtime section says of this turn's chat. */
export function runtimeContext(
  chatKey: string,
  pending: ChatMessage[],
  loaded: ProviderResult,
  offered: readonly ChatToolName[],
): RuntimeContext {
  const latest = pending.at(-1)?.metadata;
  const first = loaded.history[0];
  return {
    chatKey,
    offered,
    ...(first && isSummary(first) && { summarized: true }),
    ...(loaded.memory && { memory: loaded.memory }),
    ...(loaded.instructions && { instructions: loaded.instructions }),
    ...(latest?.channel !== undefined && { channel: latest.channel }),
    ...(latest?.chatId !== undefined && { chatId: latest.chatId }),
  };
}

/**
 * The Provider's pending messages, each with its token count: a Provider that added to a
 * message (retrieved documents) dropped its count, and it is counted here, by the tokenizer
 * that counted the rest, so the Compressor fits what was added. Counted ones are kept as they are.
 */
export function countedPending(pending: InboxEntry[], maxCharsPerMessage: number): Promise<InboxEntry[]> {
  return Promise.all(
    pending.map(async (e) => {
      const message = await withTokens(e.message, maxCharsPerMessage);
      return message === e.message ? e : { streamId: e.streamId, message };
    }),
  );
}

/**
 * Each offered tool's `context` for the SDK's `toolsContext`: the turn's state for chatlane's
 * own tools that read it, the chat's context for the tools given in code (built only when
 * the process has any), nothing for an operator's MCP tools.
 */
export function toolsContextOf(
  offer: { withTurn: readonly string[]; custom: readonly string[] },
  turn: ToolTurn,
  chat: () => ToolContextTurn,
): Record<string, unknown> {
  const contexts: Record<string, unknown> = {};
  for (const name of offer.withTurn) contexts[name] = turn;
  if (offer.custom.length === 0) return contexts;
  const context = toolContext(chat());
  for (const name of offer.custom) contexts[name] = context;
  return contexts;
}
