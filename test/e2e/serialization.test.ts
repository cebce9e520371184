import { describe, expect, it } from 'vitest';
import { textOf } from '../helpers/messages.js';
import { inParallel, postMessage } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

const CHATS = 200;
const PER_CHAT = 5;

describe('serialization across processes', () => {
  const stack = useStack('e2e-ser', {
    roles: ['ingress', 'worker', 'worker'],
    latencyMs: [2, 40],
    env: { WORKER_CONCURRENCY: '16' },
  });
  const { store } = stack;

  it(`${CHATS} chats × ${PER_CHAT} messages on 2 workers: one model call per chat at a time, every message once and in order, every chat answered`, async () => {
    const ingress = stack.ingressUrl();
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

    expect(stack.mock.state.violations).toEqual([]);
    expect(stack.mock.state.maxInFlightPerChat).toBe(1);
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
    expect(workers).toEqual(new Set(stack.procs.slice(1).map((p) => String(p.pid))));
  }, 180_000);
});
