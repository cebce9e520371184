import { tool } from 'ai';
import { z } from 'zod';
import { messageText } from '../../../shared/messages.js';
import { readRecentArchive } from '../../../shared/store/archive.js';
import type { ChatStore } from '../../../shared/store/chat-store.js';
import { toolInput } from './input.js';
import { turnOf } from './tool-turn.js';

/** How many archive entries a search reads (newest first): bounds its cost. */
export const SEARCH_ARCHIVE_ENTRIES = 500;
const SNIPPET_CHARS = 600;

export interface HistoryHit {
  archiveId: string;
  messageId: string;
  role: string;
  ts: number;
  text: string;
  score: number;
}

function terms(query: string): string[] {
  return [
    ...new Set(
      query
        .toLowerCase()
        .split(/[^\p{L}\p{N}]+/u)
        .filter((t) => t.length > 1),
    ),
  ];
}

function occurrences(haystack: string, needle: string): number {
  let n = 0;
  for (let i = haystack.indexOf(needle); i >= 0; i = haystack.indexOf(needle, i + needle.length)) n++;
  return n;
}

/** Case-insensitive term search over this chat's archived originals, best matches first, newer first on ties. */
export async function searchHistory(
  store: ChatStore,
  chatKey: string,
  query: string,
  limit: number,
): Promise<HistoryHit[]> {
  const wanted = terms(query);
  if (wanted.length === 0) return [];
  const entries = await readRecentArchive(store, chatKey, SEARCH_ARCHIVE_ENTRIES);
  const hits: HistoryHit[] = [];
  for (const entry of entries) {
    for (const m of entry.messages) {
      const text = messageText(m);
      const lower = text.toLowerCase();
      const matched = wanted.filter((t) => lower.includes(t));
      if (matched.length === 0) continue;
      // Distinct terms matched dominate; repetitions break ties.
      const score =
        matched.length * 100 + matched.reduce((n, t) => n + Math.min(occurrences(lower, t), 10), 0);
      hits.push({
        archiveId: entry.id,
        messageId: m.id,
        role: m.role,
        ts: m.metadata.ts,
        text: text.length > SNIPPET_CHARS ? `${text.slice(0, SNIPPET_CHARS)}…` : text,
        score,
      });
    }
  }
  hits.sort((a, b) => b.score - a.score || b.ts - a.ts);
  return hits.slice(0, limit);
}

const INPUT = toolInput(
  z.object({
    query: z.string().min(1).max(500),
    limit: z.number().int().min(1).max(20).optional(),
  }),
);

/** `chat_history_search`, one per process: the turn comes with each call (tool-turn.ts). */
export const historySearchTool = tool({
  description:
    "Search this chat's older messages that were summarised away (try the summary's lookup hints " +
    'as queries); returns the originals (role, time, text).',
  inputSchema: INPUT,
  execute: async ({ query, limit }, options) => {
    const { store, chatKey } = turnOf(options);
    const hits = await searchHistory(store, chatKey, query, limit ?? 5);
    return {
      results: hits.map((h) => ({
        archiveId: h.archiveId,
        messageId: h.messageId,
        role: h.role,
        time: new Date(h.ts).toISOString(),
        text: h.text,
      })),
    };
  },
});
