import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { textOf } from '../helpers/messages.js';
import { inParallel, postMessage, type RoleProcess, startRole } from '../helpers/processes.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

const CHATS = 200;
const PER_CHAT = 5;

describe('serialization across processes', () => {
  const redis = testRedis();
  const prefix = randomPrefix('e2e-ser');
  const store = new ChatStore(redis, { prefix, maxEvents: 1000 });
  let mock: Awaited<ReturnType<typeof startMockLlm>>;
  const procs: RoleProcess[] = [];

  beforeAll(async () => {
    mock = await startMockLlm({ port: 0, latencyMs: [2, 40] });
    const env = {
      CHATLANE_PREFIX: prefix,
      LLM_BASE_URL: mock.url,
      LLM_MODEL: 'mock',
      WORKER_CONCURRENCY: '16',
    };
    procs.push(await startRole('ingress', env));
    procs.push(await startRole('worker', env), await startRole('worker', env));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill()));
    await mock?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it(`${CHATS} chats × ${PER_CHAT} messages on 2 workers: one model call per chat at a time, every message once and in order, every chat answered`, async () => {
    const ingress = procs[0]!.url!;
    const chats = Array.from({ length: CHATS }, (_, i) => `chat-${i}`);
    // Each chat sends its messages in order; all chats at once.
    await inParallel(chats, 64, async (chatKey) => {
      for (let j = 0; j < PER_CHAT; j++)
        await postMessage(ingress, chatKey, `${chatKey}-m${j}`, `${chatKey} says ${j}`);
    });

    await waitFor(
      async () => {
        for (const chatKey of chats) {
          if ((await store.pendingCount(chatKey)) > 0) return false;
          const last = (await store.readHistoryWindow(chatKey, 1)).messages[0];
          if (last?.role !== 'assistant') return false;
        }
        return true;
      },
      { timeoutMs: 120_000, intervalMs: 250, what: 'every chat answered' },
    );

    expect(mock.state.violations).toEqual([]);
    expect(mock.state.maxInFlightPerChat).toBe(1);
    for (const chatKey of chats) {
      const history = await store.readHistory(chatKey);
      const userIds = history.filter((m) => m.role === 'user').map((m) => m.id);
      expect(userIds).toEqual(Array.from({ length: PER_CHAT }, (_, j) => `${chatKey}-m${j}`));
      expect(history.at(-1)?.role).toBe('assistant');
      // Every message was answered: the echoes in the outbox cover every text sent.
      const sent = (await store.readOutbox(chatKey, undefined, 100)).map((o) => o.text).join('\n');
      for (const m of history.filter((m) => m.role === 'user')) expect(sent).toContain(textOf(m));
      // Nothing of another chat leaked in.
      expect(history.every((m) => m.metadata.chatKey === chatKey)).toBe(true);
    }
    // Both worker processes took part.
    const events = (await Promise.all(chats.map((c) => store.readEvents(c, undefined, 1000)))).flat();
    const workers = new Set(
      events.filter((e) => e.type === 'turn.committed').map((e) => String(e.data.worker).split(':')[1]),
    );
    expect(workers).toEqual(new Set(procs.slice(1).map((p) => String(p.pid))));
  }, 180_000);
});
