import { z } from 'zod';

/**
 * Retention: how much of a chat Redis keeps (docs/redis.md "Retention"). Redis runs `noeviction`,
 * so every per-chat structure that grows with use has a cap, enforced by the script that
 * appends to it (atomically, in the chat's slot). The variables are parsed in config.ts.
 */

const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

/** A function, not a constant: the schemas are built for config.ts's one parse and then dropped. */
export const retentionShape = () => ({
  // Compaction archive (summarised-away messages): oldest entries dropped past either cap.
  ARCHIVE_MAX_ENTRIES: int(100, 1).describe(
    'per-chat compaction archive: entries kept, oldest dropped first',
  ),
  ARCHIVE_MAX_BYTES: int(512 * 1024, 1024).describe(
    'per-chat compaction archive: bytes kept, oldest entries dropped first',
  ),
  // Context snapshots (`new`/`clear`/`load`): the oldest dropped past this many.
  CONTEXTS_MAX: int(10, 1).describe('context snapshots kept per chat, oldest dropped first'),
  // Outbox: items delivery still needs are always kept; beyond them, the newest this many
  // (for API readers and SSE resume). Trimmed once the outbox holds a quarter more.
  OUTBOX_KEEP_ITEMS: int(200, 1).describe(
    'outbox items kept beyond those delivery still needs (for API readers and stream resume)',
  ),
  // A chat idle this long (no message in, no reply out, no event) is deleted whole, with its
  // activity index entry, by a maintenance job every CHAT_EXPIRY_INTERVAL_MS. 0 = never.
  CHAT_TTL_DAYS: int(0, 0).describe(
    'delete a whole chat idle this long, every key and its index entry (0 = never)',
  ),
  CHAT_EXPIRY_INTERVAL_MS: int(10 * 60_000, 100).describe(
    'how often one worker runs the expiry pass (with CHAT_TTL_DAYS; up to SWEEP_BATCH chats a pass)',
  ),
});

/** What the store scripts need (the chat TTL is the maintenance job's, see worker/retention). */
export interface StoreRetention {
  archiveMaxEntries: number;
  archiveMaxBytes: number;
  contextsMax: number;
  outboxKeep: number;
}

export function storeRetentionOf(config: {
  ARCHIVE_MAX_ENTRIES: number;
  ARCHIVE_MAX_BYTES: number;
  CONTEXTS_MAX: number;
  OUTBOX_KEEP_ITEMS: number;
}): StoreRetention {
  return {
    archiveMaxEntries: config.ARCHIVE_MAX_ENTRIES,
    archiveMaxBytes: config.ARCHIVE_MAX_BYTES,
    contextsMax: config.CONTEXTS_MAX,
    outboxKeep: config.OUTBOX_KEEP_ITEMS,
  };
}

/** The defaults above, for stores built without a config (tests, benchmarks). */
export const DEFAULT_STORE_RETENTION: StoreRetention = storeRetentionOf(
  z.object(retentionShape()).parse({}, { jitless: true }),
);

export const DAY_MS = 24 * 3600 * 1000;
