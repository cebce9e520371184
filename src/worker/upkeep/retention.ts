import type { Queue } from 'bullmq';
import { LIVE_JOB_STATES } from '../../shared/jobs.js';
import { allChatKeys, chatsIndexKey } from '../../shared/keys.js';
import type { Logger } from '../../shared/logger.js';
import type { ChatStore } from '../../shared/store/chat-store.js';
import { scripts } from '../../shared/store/scripts.js';

/**
 * Whole-chat expiry (CHAT_TTL_DAYS): a maintenance job deletes chats idle for the TTL, oldest
 * activity first. Each chat goes in one script (chat-expire.lua) that deletes every key of the
 * chat or nothing, and only when nothing is pending, no turn or delivery holds a lease, every
 * reply was delivered and no stream saw an entry within the TTL; it runs atomically with
 * ingest (same slot), so a message accepted at the edge is either pending (the chat is kept)
 * or lands after (a new chat, answered as any first message).
 *
 * The activity index `P:chats` lives in another slot (one key for all chats): its entry goes
 * after the keys, and only if no ingest touched it since it was read. A crash in between
 * leaves an entry without a chat, removed by the next pass ('gone'); never a chat without
 * its entry (that one would never be checked again).
 */

const EXPIRE_CONCURRENCY = 16;

export interface ExpiryDeps {
  store: ChatStore;
  /** The queues whose jobs write to a chat (turns, compaction, deliveries): a live job keeps it. */
  queues: Queue[];
  ttlMs: number;
  /** Chats checked per pass, oldest index score first. */
  batch: number;
  logger: Logger;
}

export type ExpiryVerdict = 'deleted' | 'gone' | 'job' | `kept:${string}`;

export interface ExpiryReport {
  checked: number;
  deleted: number;
  /** Index entries whose chat had no key left. */
  gone: number;
  kept: Record<string, number>;
}

async function liveJob(queues: Queue[], chatKey: string): Promise<boolean> {
  for (const queue of queues) {
    const id = await queue.getDeduplicationJobId(chatKey);
    if (id && LIVE_JOB_STATES.has(await queue.getJobState(id))) return true;
  }
  return false;
}

/** Expire one chat if it is idle for the TTL; `indexScore` is its index entry as read. */
export async function expireChat(
  deps: Pick<ExpiryDeps, 'store' | 'queues' | 'ttlMs'>,
  chatKey: string,
  indexScore: number,
): Promise<ExpiryVerdict> {
  const { store } = deps;
  if (await liveJob(deps.queues, chatKey)) return 'job';
  const k = store.keys(chatKey);
  const contextIds = await store.redis.hkeys(k.contexts);
  const raw = (await scripts.chatExpire.run(
    store.redis,
    [
      k.meta,
      k.inbox,
      k.outbox,
      k.events,
      k.relay,
      k.contexts,
      ...allChatKeys(store.prefix, chatKey, contextIds),
    ],
    [deps.ttlMs, contextIds.length],
  )) as [string, string?, number?];
  const index = chatsIndexKey(store.prefix);
  if (raw[0] === 'deleted' || raw[0] === 'gone') {
    await scripts.indexForget.run(store.redis, [index], [chatKey, indexScore]);
    return raw[0];
  }
  // Active by its own streams (a reply, a contact send, an event) though its index entry is
  // old: move the entry to that activity so the next passes look at older chats first.
  const last = Number(raw[2] ?? 0);
  if (raw[1] === 'active' && last > indexScore) await store.redis.zadd(index, 'XX', 'GT', last, chatKey);
  return `kept:${raw[1] ?? 'unknown'}`;
}

/** One pass: up to `batch` chats whose index entry is older than the TTL. */
export async function expireIdleChats(deps: ExpiryDeps, now = Date.now()): Promise<ExpiryReport> {
  const report: ExpiryReport = { checked: 0, deleted: 0, gone: 0, kept: {} };
  if (deps.ttlMs <= 0) return report;
  const flat = await deps.store.redis.zrangebyscore(
    chatsIndexKey(deps.store.prefix),
    '-inf',
    now - deps.ttlMs,
    'WITHSCORES',
    'LIMIT',
    0,
    Math.max(1, deps.batch),
  );
  const chats: Array<[string, number]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) chats.push([flat[i]!, Number(flat[i + 1])]);
  let next = 0;
  const runners = Array.from({ length: Math.min(EXPIRE_CONCURRENCY, chats.length) }, async () => {
    while (next < chats.length) {
      const [chatKey, score] = chats[next++]!;
      const verdict = await expireChat(deps, chatKey, score);
      report.checked += 1;
      if (verdict === 'deleted') report.deleted += 1;
      else if (verdict === 'gone') report.gone += 1;
      else report.kept[verdict] = (report.kept[verdict] ?? 0) + 1;
    }
  });
  await Promise.all(runners);
  if (report.deleted > 0) deps.logger.info(report, 'expired idle chats');
  return report;
}
