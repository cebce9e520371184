import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { QUEUES, queueOptions } from '../../src/shared/jobs.js';
import { readArchive } from '../../src/shared/store/archive.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { postMessage, type RoleProcess, startRole } from '../helpers/processes.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

const MESSAGES = 300;
const MAX_INPUT_TOKENS = 1500;
const CHAT = 'long-chat';

describe('compaction end to end', () => {
  const redis = testRedis();
  const prefix = randomPrefix('e2e-compact');
  const store = new ChatStore(redis, { prefix, maxEvents: 5000 });
  const compaction = new Queue(QUEUES.compaction, queueOptions(prefix, QUEUES.compaction, redis));
  let mock: Awaited<ReturnType<typeof startMockLlm>>;
  const procs: RoleProcess[] = [];

  beforeAll(async () => {
    mock = await startMockLlm({ port: 0, latencyMs: [0, 5] });
    const env = {
      CHATLANE_PREFIX: prefix,
      LLM_BASE_URL: mock.url,
      LLM_MODEL: 'mock',
      MAX_INPUT_TOKENS: String(MAX_INPUT_TOKENS),
      HISTORY_KEEP_LAST_MESSAGES: '10',
      EVENTS_MAX_LEN: '5000',
    };
    procs.push(
      await startRole('ingress', env),
      await startRole('worker', env),
      await startRole('compactor', env),
    );
  }, 60_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill()));
    await compaction.close();
    await mock?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it(`a ${MESSAGES}-message chat stays under MAX_INPUT_TOKENS on every model request, and every original is in history or archive exactly once`, async () => {
    const ingress = procs[0]!.url!;
    for (let i = 0; i < MESSAGES; i += 10) {
      for (let j = i; j < i + 10; j++) {
        await postMessage(
          ingress,
          CHAT,
          `m${j}`,
          `message ${j}: the user talks about subject ${j} at some length, with details ${j * 7}`,
        );
      }
      await waitFor(async () => (await store.pendingCount(CHAT)) === 0, {
        what: `batch ${i} consumed`,
        timeoutMs: 30_000,
      });
    }
    await waitFor(
      async () => {
        const last = (await store.readHistoryWindow(CHAT, 1)).messages[0];
        const counts = await compaction.getJobCounts('waiting', 'active', 'delayed');
        return (
          last?.role === 'assistant' &&
          (counts.waiting ?? 0) + (counts.active ?? 0) + (counts.delayed ?? 0) === 0
        );
      },
      { what: 'last turn committed and compaction queue drained', timeoutMs: 60_000 },
    );

    const turnRequests = mock.state.recorded(CHAT);
    expect(turnRequests.length).toBeGreaterThan(30);
    for (const r of turnRequests) expect(r.promptTokens).toBeLessThanOrEqual(MAX_INPUT_TOKENS);

    const history = await store.readHistory(CHAT);
    const archived = (await readArchive(store, CHAT, undefined, 1000)).flatMap((a) => a.entry.messages);
    const userIds = [...archived, ...history.filter((m) => m.metadata.kind !== 'summary')]
      .filter((m) => m.role === 'user')
      .map((m) => m.id);
    expect(userIds).toEqual(Array.from({ length: MESSAGES }, (_, i) => `m${i}`));
    expect(history[0]?.metadata.kind).toBe('summary');
    expect(history.length).toBeLessThan(100);
    const applied = (await store.readEvents(CHAT, undefined, 5000)).filter(
      (e) => e.type === 'compaction.applied',
    );
    expect(applied.length).toBeGreaterThan(1);
  }, 180_000);
});
