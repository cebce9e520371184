import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { QUEUES, queueOptions } from '../../src/shared/jobs.js';
import { readArchive } from '../../src/shared/store/archive.js';
import { postMessage } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

const MESSAGES = 300;
const MAX_INPUT_TOKENS = 1500;
const CHAT = 'long-chat';

describe('compaction end to end', () => {
  const stack = useStack('e2e-compact', {
    roles: ['ingress', 'worker', 'compactor'],
    latencyMs: [0, 5],
    maxEvents: 5000,
    env: {
      MAX_INPUT_TOKENS: String(MAX_INPUT_TOKENS),
      HISTORY_KEEP_LAST_MESSAGES: '10',
      EVENTS_MAX_LEN: '5000',
    },
  });
  const { store } = stack;
  const compaction = new Queue(QUEUES.compaction, queueOptions(stack.prefix, QUEUES.compaction, stack.redis));
  afterAll(() => compaction.close());

  it(`a ${MESSAGES}-message chat stays under MAX_INPUT_TOKENS on every model request, and every original is in history or archive exactly once`, async () => {
    const ingress = stack.ingressUrl();
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

    const turnRequests = stack.mock.state.recorded(CHAT);
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
