/**
 * The mock's prompt cache: how many input tokens of a request a provider's prefix cache
 * would have served from that chat's previous request (OpenAI reports them as
 * `usage.prompt_tokens_details.cached_tokens`). Tests and benchmarks see caching work, or see
 * that a request layout breaks it.
 *
 * Deterministic and exact at message granularity: a provider caches the longest identical
 * prefix in the order tools → system → messages, so the cached tokens are those of the
 * leading messages (system ones included) that are byte-identical, as JSON, to the previous
 * request's, counted as `prompt_tokens` counts them — and nothing when the tool definitions
 * differ. A message that differs counts as not cached even where its first bytes match, and
 * there is no 1,024-token minimum nor 128-token rounding (OpenAI has both): the figures show
 * the request layout, not one provider's block size.
 */

interface Seen {
  tools: string;
  messages: string[];
}

/** Chats remembered at most: the oldest is forgotten first (a benchmark may run many). */
const DEFAULT_MAX_CHATS = 10_000;

export class MockPromptCache {
  private readonly seen = new Map<string, Seen>();

  constructor(private readonly maxChats = DEFAULT_MAX_CHATS) {}

  /**
   * The cached tokens of this request given the chat's previous one; this request becomes
   * the chat's previous. `tokensOf(i)` counts message `i` as `prompt_tokens` does.
   */
  read(
    chatKey: string,
    tools: unknown,
    messages: readonly unknown[],
    tokensOf: (i: number) => number,
  ): number {
    const now: Seen = {
      tools: JSON.stringify(tools ?? []),
      messages: messages.map((m) => JSON.stringify(m)),
    };
    const before = this.seen.get(chatKey);
    this.seen.delete(chatKey);
    this.seen.set(chatKey, now);
    if (this.seen.size > this.maxChats) this.seen.delete(this.seen.keys().next().value as string);
    if (!before || before.tools !== now.tools) return 0;
    let cached = 0;
    const n = Math.min(before.messages.length, now.messages.length);
    for (let i = 0; i < n && before.messages[i] === now.messages[i]; i++) cached += tokensOf(i);
    return cached;
  }

  clear(): void {
    this.seen.clear();
  }
}
