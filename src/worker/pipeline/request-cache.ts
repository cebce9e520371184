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
  const { ts, username, userId } = message.metadata;
  const time = Number.isFinite(ts) ? `sent ${new Date(ts).toISOString().slice(0, 19)}Z` : 'sent';
  const who = [username, userId && `(id ${userId})`].filter(Boolean).join(' ');
  return `[${time}${who ? ` by ${who}` : ''}]`;
}

/** Tokens the context block adds to `message` (its text and the line break after it). */
export function contextBlockTokens(message: ChatMessage): number {
  const block = contextBlock(message);
  return block === undefined ? 0 : countTextTokens(block) + 1;
}
