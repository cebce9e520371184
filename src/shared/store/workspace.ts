import type { ChatStore } from './chat-store.js';
import { scripts } from './scripts.js';

/**
 * A chat's exec_shell workspace as Redis keeps it: one gzipped tar in the chat's slot, so any
 * worker can restore it (workers keep nothing between turns). Read without a fence (a stale
 * read only means the turn restores what the last fenced save left); written only with one.
 */

export async function readWorkspace(store: ChatStore, chatKey: string): Promise<Buffer | null> {
  return store.redis.getBuffer(store.keys(chatKey).workspace);
}

/** Save the archive iff `fence` still holds the chat; `bytes` is its size before compression. */
export async function saveWorkspace(
  store: ChatStore,
  chatKey: string,
  save: { fence: string; runId: string; archive: Buffer; bytes: number },
): Promise<'ok' | 'fenced-out'> {
  const k = store.keys(chatKey);
  const res = (await scripts.workspaceSave.run(
    store.redis,
    [k.meta, k.workspace, k.events],
    [save.fence, store.maxEvents, save.archive, save.runId, save.bytes],
    store.events,
  )) as [string, string?];
  return res[0] === 'ok' ? 'ok' : 'fenced-out';
}
