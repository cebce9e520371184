import type { SystemModelMessage } from 'ai';
import { type ChatMessage, isSummary } from '../../shared/messages.js';
import { countTextTokens } from '../../shared/tokens.js';

/**
 * What makes a turn's request one that providers' prompt caches can reuse
 * (docs/prompt-caching.md): providers cache the longest identical prefix in the order
 * tools → system → messages, so between two turns of a chat the earlier request must be a
 * prefix of the later one. Whatever changes every turn therefore rides on the messages
 * themselves, fixed per message; and each provider is told where and under which key to cache.
 */

/** Provider options as the AI SDK takes them on a call or a message. */
export type ProviderOptions = NonNullable<SystemModelMessage['providerOptions']>;

/** Anthropic's cache breakpoint; every other provider ignores the `anthropic` options. */
export const CACHE_POINT = { anthropic: { cacheControl: { type: 'ephemeral' } } } satisfies ProviderOptions;

/**
 * Call-level options: OpenAI routes requests with one `prompt_cache_key` to the same cache, so
 * a chat's requests find its prefix (the Responses and Chat APIs of `@ai-sdk/openai` read
 * it). Not sent on the OpenAI-compatible wire: servers there differ, and some reject fields
 * they do not know.
 */
export function cacheKeyOptions(chatKey: string): ProviderOptions {
  return { openai: { promptCacheKey: chatKey } };
}

/**
 * A user message's context block: when it arrived (its ingest time, to the second) and who
 * wrote it. Derived from the stored message alone, so the message reads the same in every
 * request that carries it (this turn's, and every later turn's history); the newest user
 * message's block is the turn's clock, at the end of the request where it breaks no prefix.
 */
export function contextBlock(message: ChatMessage): string | undefined {
  if (message.role !== 'user' || isSummary(message)) return undefined;
  const { ts } = message.metadata;
  const time = Number.isFinite(ts) ? `sent ${new Date(ts).toISOString().slice(0, 19)}Z` : 'sent';
  const who = senderOf(message);
  return `[${time}${who ? ` by ${who}` : ''}]`;
}

function senderOf(message: ChatMessage): string {
  const { username, userId } = message.metadata;
  return [username, userId && `(id ${userId})`].filter(Boolean).join(' ');
}

let timeTokens: number | undefined;

/**
 * The time part's tokens, bracket and line break included: the same layout for every time,
 * so counted once (the most any of these takes, plus one) instead of per message per turn.
 * Counted on first use, not when the module loads: that would load the tokenizer's rank
 * table into every process importing chatlane.
 */
function timeTokensOf(): number {
  timeTokens ??=
    Math.max(
      ...['2026-11-26T07:08:09', '1999-01-01T00:00:00', '2038-12-31T23:59:59', '2100-10-10T10:10:10'].map(
        (t) => countTextTokens(`[sent ${t}Z]`),
      ),
    ) + 2;
  return timeTokens;
}

/** Senders' tokens by text: a chat has few senders, and each is counted once. */
const senderTokens = new Map<string, number>();
const MAX_SENDERS = 10_000;

/**
 * Tokens the context block adds to `message` (at least its text's and the line break's):
 * counted for every message of every turn's window, so the block is not tokenized each
 * time (that was ~30 µs a message) but bounded from its parts.
 */
export function contextBlockTokens(message: ChatMessage): number {
  if (message.role !== 'user' || isSummary(message)) return 0;
  const who = senderOf(message);
  if (!who) return timeTokensOf();
  let n = senderTokens.get(who);
  if (n === undefined) {
    if (senderTokens.size >= MAX_SENDERS) senderTokens.clear();
    n = countTextTokens(` by ${who}`);
    senderTokens.set(who, n);
  }
  return timeTokensOf() + n;
}
