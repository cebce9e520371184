import type { LanguageModel } from 'ai';
import { silentLogger } from '../../src/shared/logger.js';
import type { RedisClient } from '../../src/shared/redis.js';
import { ChatStore, type LeaseRenewal, type StoreOptions } from '../../src/shared/store/chat-store.js';
import { ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { compactChat } from '../../src/worker/compaction/compact.js';
import { DefaultAssembler } from '../../src/worker/pipeline/assembler.js';
import { TokenBudgetCompressor } from '../../src/worker/pipeline/compressor.js';
import { RedisProvider } from '../../src/worker/pipeline/provider.js';
import { contextBlockTokens } from '../../src/worker/pipeline/request-cache.js';
import type { TurnDeps, TurnSettings } from '../../src/worker/turn/turn.js';
import { userMessage } from './messages.js';

export function turnDeps(
  redis: RedisClient,
  prefix: string,
  model: LanguageModel,
  settings: Partial<TurnSettings> & { maxPendingPerTurn?: number; windowMessages?: number } = {},
  storeOptions: Partial<StoreOptions> = {},
): TurnDeps {
  const store = new ChatStore(redis, { prefix, maxEvents: 500, ...storeOptions });
  return {
    store,
    model,
    provider: new RedisProvider(store, {
      windowMessages: settings.windowMessages ?? 200,
      maxPendingPerTurn: settings.maxPendingPerTurn ?? 20,
      maxCharsPerMessage: settings.maxCharsPerMessage ?? 4000,
    }),
    compressor: new TokenBudgetCompressor({
      maxCharsPerMessage: settings.maxCharsPerMessage ?? 4000,
      overheadTokens: contextBlockTokens,
    }),
    assembler: new DefaultAssembler({ maxSendsPerTurn: settings.maxSendsPerTurn ?? 5 }),
    settings: {
      leaseMs: 5000,
      maxSteps: 8,
      maxMerges: 8,
      maxInputTokens: 12_000,
      maxSendsPerTurn: 5,
      maxCharsPerMessage: 4000,
      reserveTokens: 200,
      ...settings,
    },
    workerId: 'test-worker',
    logger: silentLogger(),
    // As in production, every turn streams its reply.
    replies: new ReplyStreams(redis, { prefix, maxEvents: 500, maxLen: 1000, ttlMs: 60_000 }),
  };
}

/** `deps` with the synchronous compaction a turn runs after a context-overflow refusal. */
export function withOverflowCompaction(deps: TurnDeps, model: LanguageModel): TurnDeps {
  const compaction = {
    store: deps.store,
    model,
    modelName: 'mock',
    logger: silentLogger(),
    settings: {
      keepLast: 4,
      keepRecentTokens: 0,
      maxOutputTokens: 300,
      archive: true,
      maxEvents: 500,
      maxCharsPerMessage: 4000,
    },
  };
  deps.compactNow = (chatKey) => compactChat(compaction, chatKey);
  return deps;
}

/** Ingests one user message per text (id `id-<text>`), as the ingress would, in order. */
export async function ingestTexts(store: ChatStore, chatKey: string, ...texts: string[]): Promise<void> {
  for (const t of texts) {
    await store.ingest(chatKey, userMessage(chatKey, `id-${t}`, t), {
      maxPending: 1000,
      dedupWindowMs: 60_000,
    });
  }
}

/** Leases on `chatKeys` held by `w:<chatKey>` (run `run-<chatKey>`), as renew-many takes them: 60 s each when renewed. */
export async function holdLeases(store: ChatStore, chatKeys: string[]): Promise<LeaseRenewal[]> {
  const leases: LeaseRenewal[] = [];
  for (const chatKey of chatKeys) {
    const lease = await store.acquire(chatKey, `w:${chatKey}`, 1000);
    if (!lease.ok) throw new Error(`${chatKey} is busy`);
    leases.push({
      chatKey,
      owner: `w:${chatKey}`,
      fence: lease.fence,
      leaseMs: 60_000,
      runId: `run-${chatKey}`,
    });
  }
  return leases;
}
