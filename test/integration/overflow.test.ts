import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { readArchive } from '../../src/shared/store/archive.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { createModel } from '../../src/worker/agent/model.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { assistantMessage, counted, userMessage } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { turnDeps, withOverflowCompaction } from '../helpers/turn-deps.js';
import { mockModelConfig } from '../helpers/worker-config.js';

const redis = testRedis();
let mock: Awaited<ReturnType<typeof startMockLlm>>;
let prefix: string;
let deps: TurnDeps;

beforeAll(async () => {
  mock = await startMockLlm({ port: 0 });
});
beforeEach(() => {
  prefix = randomPrefix('overflow');
  mock.state.reset();
  // The real HTTP model: the provider's 400 arrives as a real APICallError.
  const model = createModel(mockModelConfig(mock.url));
  deps = turnDeps(redis, prefix, model);
  withOverflowCompaction(deps, model);
});
afterAll(async () => {
  await mock.close();
  await deleteLabel(redis, 'overflow');
  redis.disconnect();
});

async function seed(store: ChatStore, chatKey: string, n: number): Promise<void> {
  const lease = await store.acquire(chatKey, 'seeder', 5000);
  if (!lease.ok) throw new Error('busy');
  const messages: ChatMessage[] = Array.from({ length: n }, (_, i) =>
    counted(
      i % 2 === 0
        ? userMessage(chatKey, `h${i}`, `old question ${i}`)
        : assistantMessage(chatKey, `h${i}`, `old answer ${i}`),
    ),
  );
  await store.commit(chatKey, lease.fence, { runId: 'seed', consumed: [], messages });
  await store.finish(chatKey, lease.fence, 'seeder', 'seed');
  await store.ingest(chatKey, userMessage(chatKey, 'q', 'the new question'), {
    maxPending: 100,
    dedupWindowMs: 60_000,
  });
}

describe('context overflow recovery', () => {
  it('a context-length refusal triggers one synchronous compaction and the retried turn succeeds', async () => {
    await seed(deps.store, 'c1', 20);
    mock.state.failNext({ chatKey: 'c1', count: 1 });
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'done', consumed: 1, sent: 1 });

    const history = await deps.store.readHistory('c1');
    expect(history[0]?.metadata.kind).toBe('summary');
    expect(history.at(-2)?.id).toBe('q');
    const types = (await deps.store.readEvents('c1', undefined, 100)).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['turn.overflow', 'compaction.applied', 'turn.committed']));
    expect(types).not.toContain('turn.failed');
    expect((await deps.store.readOutbox('c1', undefined, 10)).map((o) => o.text)).toEqual([
      'echo: the new question',
    ]);
  });

  it('a second refusal fails the batch: one notice, the message kept failed in history, no history lost, the chat free', async () => {
    await seed(deps.store, 'c1', 20);
    mock.state.failNext({ chatKey: 'c1', count: 2 });
    const outcome = await runTurn(deps, 'c1');
    expect(outcome).toMatchObject({ status: 'failed', code: 'CONTEXT_OVERFLOW', failed: 1, pending: 0 });

    expect(await deps.store.readAllPending('c1')).toEqual([]);
    const history = await deps.store.readHistory('c1');
    expect(history.at(-1)).toMatchObject({
      id: 'q',
      metadata: { failed: true, failure: { code: 'CONTEXT_OVERFLOW' } },
    });
    const archived = (await readArchive(deps.store, 'c1', undefined, 10)).flatMap((a) =>
      a.entry.messages.map((m) => m.id),
    );
    const kept = history.filter((m) => m.metadata.kind !== 'summary' && m.id !== 'q').map((m) => m.id);
    expect([...archived, ...kept].sort()).toEqual(Array.from({ length: 20 }, (_, i) => `h${i}`).sort());
    const types = (await deps.store.readEvents('c1', undefined, 100)).map((e) => e.type);
    expect(types.filter((t) => t === 'turn.overflow')).toHaveLength(1);
    expect(types.filter((t) => t === 'turn.failed')).toHaveLength(1);
    expect((await deps.store.readOutbox('c1', undefined, 10)).map((o) => o.notice)).toEqual(['failure']);
    // The lease was released: the next turn can start at once.
    expect((await deps.store.acquire('c1', 'next', 1000)).ok).toBe(true);
  });
});
