import { countTextTokens } from '../tokens.js';
import type { ChatStore } from './chat-store.js';
import { scripts } from './scripts.js';

/**
 * A chat's memory document (seed 001 §2): what the model keeps about this chat across turns,
 * compactions and context switches. It is not history: one string the model replaces whole.
 */

export type MemoryWriteResult =
  | { status: 'ok'; tokens: number }
  | { status: 'too-large'; tokens: number; maxTokens: number }
  | { status: 'fenced-out' };

export async function readMemory(store: ChatStore, chatKey: string): Promise<string> {
  return (await store.redis.get(store.keys(chatKey).memory)) ?? '';
}

/**
 * Replace the memory (empty content deletes it). A turn passes its fence: a stale turn's
 * write is rejected by the script. An operator passes `undefined` (not a turn, not fenced).
 * Content over `maxTokens` is refused before anything is written.
 */
export async function writeMemory(
  store: ChatStore,
  chatKey: string,
  write: { content: string; fence: string | undefined; runId: string; maxTokens: number },
): Promise<MemoryWriteResult> {
  const tokens = countTextTokens(write.content);
  if (tokens > write.maxTokens) return { status: 'too-large', tokens, maxTokens: write.maxTokens };
  const k = store.keys(chatKey);
  const res = (await scripts.memorySet.run(
    store.redis,
    [k.meta, k.memory, k.events],
    [write.fence ?? '', store.maxEvents, write.content, write.runId, tokens],
    store.events,
  )) as [string, string?];
  return res[0] === 'ok' ? { status: 'ok', tokens } : { status: 'fenced-out' };
}
