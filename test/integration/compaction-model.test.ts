import { APICallError } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import type { createMetrics } from '../../src/shared/metrics.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { readChatUsage } from '../../src/shared/store/usage.js';
import { utcDay } from '../../src/shared/usage.js';
import { compactChat } from '../../src/worker/compaction/compact.js';
import { assistantMessage, counted, userMessage } from '../helpers/messages.js';
import { mockChain } from '../helpers/mock-chain.js';
import { sampleValue } from '../helpers/prom.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * Which model a compaction's summary is counted under: the compactor's model chain as a
 * process builds it (test/helpers/mock-chain.ts), `ai/test` models as the providers' models,
 * real Redis and the real compaction script.
 */

const redis = testRedis();
let store: ChatStore;

beforeEach(() => {
  store = new ChatStore(redis, { prefix: randomPrefix('compmodel'), maxEvents: 500 });
});
afterAll(async () => {
  await deleteLabel(redis, 'compmodel');
  redis.disconnect();
});

const overloaded = new APICallError({
  message: 'overloaded',
  url: 'http://model.invalid/v1',
  requestBodyValues: {},
  statusCode: 503,
  isRetryable: true,
});

/** A provider model that summarises (input 120, output 30 tokens), or fails with `error`. */
function summarizer(name: string, error?: unknown) {
  return new MockLanguageModelV4({
    modelId: name,
    doGenerate: async () => {
      if (error) throw error;
      return {
        content: [{ type: 'text', text: `## Summary by ${name}` }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: {
          inputTokens: { total: 120, noCache: 120, cacheRead: 0, cacheWrite: 0 },
          outputTokens: { total: 30, text: 30, reasoning: 0 },
        },
        warnings: [],
      };
    },
  });
}

/** COMPACTION_MODEL=openai-compatible:<first>, LLM_FALLBACK_MODELS=openai-compatible:<rest>. */
function compactionDeps(...mocks: MockLanguageModelV4[]) {
  const { model, metrics, ids } = mockChain(mocks, 5000);
  const deps = {
    store,
    model,
    modelName: ids[0]!,
    logger: silentLogger(),
    settings: {
      keepLast: 4,
      keepRecentTokens: 0,
      maxOutputTokens: 500,
      archive: false,
      maxEvents: 500,
      maxCharsPerMessage: 4000,
    },
  };
  return { deps, metrics };
}

async function seed(chatKey: string): Promise<void> {
  const messages: ChatMessage[] = Array.from({ length: 10 }, (_, i) =>
    i % 2 === 0
      ? userMessage(chatKey, `m${i}`, `user message ${i} about topic ${i}`)
      : assistantMessage(chatKey, `m${i}`, `assistant reply ${i}`),
  );
  const lease = await store.acquire(chatKey, 'seeder', 5000);
  if (!lease.ok) throw new Error('busy');
  await store.commit(chatKey, lease.fence, { runId: 'seed', consumed: [], messages: messages.map(counted) });
  await store.finish(chatKey, lease.fence, 'seeder', 'seed');
}

/** The chat's compaction.applied event, its usage by model and the process's token counter. */
async function outcome(chatKey: string, metrics: ReturnType<typeof createMetrics>) {
  const applied = (await store.readEvents(chatKey, undefined, 100)).find(
    (e) => e.type === 'compaction.applied',
  );
  const usage = await readChatUsage(store, chatKey, {});
  const exposition = await metrics.registry.metrics();
  const tokens = (model: string, kind: string) =>
    sampleValue(exposition, 'chatlane_model_tokens_total', { model, kind });
  return { event: applied?.data, byModel: usage.byModel, tokens };
}

describe('a compaction names the model that served its summary', () => {
  it('the compaction model (COMPACTION_MODEL): on the event, in the chat usage and in the token counter', async () => {
    await seed('own');
    const { deps, metrics } = compactionDeps(summarizer('compact'), summarizer('backup'));
    expect(await compactChat(deps, 'own')).toMatchObject({ status: 'applied' });

    const { event, byModel, tokens } = await outcome('own', metrics);
    const served = 'openai-compatible:compact';
    expect(event).toMatchObject({ model: served, calls: [{ m: served, i: 120, o: 30 }] });
    expect(byModel).toEqual([
      expect.objectContaining({ model: served, calls: 1, inputTokens: 120, outputTokens: 30 }),
    ]);
    expect(tokens(served, 'input')).toBe(120);
    expect(tokens(served, 'output')).toBe(30);
    expect(await redis.hget(store.keys('own').usage, `${utcDay(Date.now())}|${served}|calls`)).toBe('1');
  });

  it('its fallback model when the compaction model is down: the event and every count name the fallback', async () => {
    await seed('down');
    const { deps, metrics } = compactionDeps(summarizer('compact', overloaded), summarizer('backup'));
    expect(await compactChat(deps, 'down')).toMatchObject({ status: 'applied' });

    const { event, byModel, tokens } = await outcome('down', metrics);
    const served = 'openai-compatible:backup';
    expect(event).toMatchObject({ model: served, calls: [{ m: served, i: 120, o: 30 }] });
    expect(byModel.map((m) => [m.model, m.calls, m.inputTokens])).toEqual([[served, 1, 120]]);
    expect(tokens(served, 'input')).toBe(120);
    expect(tokens('openai-compatible:compact', 'input')).toBe(undefined);
  });
});
