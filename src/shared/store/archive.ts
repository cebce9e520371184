import { z } from 'zod';
import {
  type ChatMessage,
  chatMessageSchema,
  parseStoredMessage,
  type SourceRange,
  sourceRangeSchema,
} from '../messages.js';
import { parseJsonAs } from '../parse-json.js';
import { STORED_MAX_DEPTH, storedJson } from '../storable.js';
import type { CallUsage } from '../usage.js';
import type { ChatStore } from './chat-store.js';
import { scripts } from './scripts.js';

/**
 * Compaction's view of the store: a consistent snapshot of the history, the CAS that
 * replaces its head with a summary, and the archive of what was summarised away.
 */

export const archiveEntrySchema = z.object({
  id: z.string(),
  kind: z.enum(['compaction', 'context']),
  createdAt: z.number(),
  sourceRange: sourceRangeSchema,
  summaryId: z.string().optional(),
  messages: z.array(chatMessageSchema),
});
export type ArchiveEntry = Omit<z.infer<typeof archiveEntrySchema>, 'messages'> & { messages: ChatMessage[] };

export interface HistorySnapshot {
  version: string;
  history: ChatMessage[];
}

export async function readSnapshot(store: ChatStore, chatKey: string): Promise<HistorySnapshot> {
  const k = store.keys(chatKey);
  const res = (await store.redis.multi().hget(k.meta, 'version').lrange(k.hist, 0, -1).exec()) as [
    [unknown, string | null],
    [unknown, string[]],
  ];
  return { version: res[0][1] ?? '0', history: res[1][1].map(parseStoredMessage) };
}

export interface CompactionApply {
  expectedVersion: string;
  /** The head messages summarised, the previous summary included, in history order. */
  replaced: ChatMessage[];
  summary: ChatMessage;
  archive: ArchiveEntry | undefined;
  maxEvents: number;
  eventData: Record<string, unknown>;
  /** The summary's model calls: counted in the chat's usage whatever the outcome. */
  usage?: CallUsage[];
}

export type CompactionApplyResult =
  | { status: 'ok'; version: string }
  | { status: 'noop' }
  | { status: 'stale'; reason: string };

export async function applyCompaction(
  store: ChatStore,
  chatKey: string,
  apply: CompactionApply,
): Promise<CompactionApplyResult> {
  const k = store.keys(chatKey);
  const first = apply.replaced[0];
  const last = apply.replaced.at(-1);
  if (!first || !last) throw new Error('nothing to replace');
  const tokens = apply.replaced.reduce((n, m) => n + (m.metadata.tokens ?? 0), 0);
  const raw = (await scripts.compact.run(
    store.redis,
    [k.meta, k.hist, k.archive, k.events, k.usage],
    [
      apply.expectedVersion,
      apply.replaced.length,
      first.id,
      last.id,
      storedJson(apply.summary, { tooDeep: 'clip' }),
      // An archive entry wraps stored messages: allow their depth plus its own levels.
      apply.archive ? storedJson(apply.archive, { tooDeep: 'clip', maxDepth: STORED_MAX_DEPTH + 4 }) : '',
      tokens,
      apply.summary.metadata.tokens ?? 0,
      apply.maxEvents,
      storedJson(apply.eventData, { tooDeep: 'clip' }),
      store.retention.archiveMaxEntries,
      store.retention.archiveMaxBytes,
      ...store.usageArgs(apply.usage),
    ],
    store.events,
  )) as [string, string | number | undefined];
  if (raw[0] === 'ok') return { status: 'ok', version: String(raw[1]) };
  if (raw[0] === 'noop') return { status: 'noop' };
  return { status: 'stale', reason: String(raw[1]) };
}

function parseEntry(json: string): ArchiveEntry | undefined {
  return parseJsonAs(archiveEntrySchema, json) as ArchiveEntry | undefined;
}

/**
 * Archive entries oldest first; `after` is the index of the last one seen. An index counts
 * from the chat's first entry ever, so it stays valid while retention drops the oldest
 * (meta `archiveDropped`); a page resumed past dropped entries starts at the oldest kept.
 */
export async function readArchive(
  store: ChatStore,
  chatKey: string,
  after: number | undefined,
  limit: number,
): Promise<Array<{ index: number; entry: ArchiveEntry }>> {
  const k = store.keys(chatKey);
  const [first, raw] = (await scripts.archiveRead.run(
    store.redis,
    [k.meta, k.archive],
    [after === undefined ? 0 : after + 1, limit],
  )) as [number, string[]];
  const out: Array<{ index: number; entry: ArchiveEntry }> = [];
  raw.forEach((json, i) => {
    const entry = parseEntry(json);
    if (entry) out.push({ index: first + i, entry });
  });
  return out;
}

/** The newest `limit` archive entries (what a search looks through). */
export async function readRecentArchive(
  store: ChatStore,
  chatKey: string,
  limit: number,
): Promise<ArchiveEntry[]> {
  const raw = await store.redis.lrange(store.keys(chatKey).archive, -limit, -1);
  return raw.map(parseEntry).filter((e): e is ArchiveEntry => e !== undefined);
}

export function rangeOf(messages: ChatMessage[], previous?: SourceRange): SourceRange {
  return {
    fromId: previous?.fromId ?? messages[0]?.id ?? '',
    toId: messages.at(-1)?.id ?? previous?.toId ?? '',
    count: (previous?.count ?? 0) + messages.length,
  };
}
