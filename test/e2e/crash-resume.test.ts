import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import { postMessage } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

/** Short leases and locks: the takeover comes within a few seconds, not the default ~11 s. */
const FAST_RECOVERY = { TURN_LEASE_MS: '1500', JOB_LOCK_MS: '1500', STALLED_INTERVAL_MS: '500' };
/** The doomed turn's second model call (after its chat_send) lasts this long: the kill lands inside it. */
const SECOND_CALL_MS = 4000;

const sentTexts = (history: ChatMessage[]) =>
  history.flatMap((m) =>
    m.parts.flatMap((p) =>
      p.type === 'tool-chat_send' && (p as { output?: { status?: string } }).output?.status === 'sent'
        ? [(p as { input: { text: string } }).input.text]
        : [],
    ),
  );

describe('a worker killed after chat_send, before its commit', () => {
  const stack = useStack('e2e-resume', { roles: ['ingress'], env: FAST_RECOVERY });
  const { store } = stack;

  it('kill -9 between the reply and the commit: the takeover does not answer again, and history holds each reply once', async () => {
    const ingress = stack.ingressUrl();
    const chats = ['resume-a', 'resume-b', 'resume-c'];
    const doomed = await stack.start('worker');
    for (const c of chats) {
      stack.mock.state.setChatLatency(c, SECOND_CALL_MS);
      await postMessage(ingress, c, `${c}-1`, `${c} first`);
    }
    // The second request of a turn comes after its chat_send wrote the outbox: every chat's
    // reply is out, and its turn waits in the model until long after the kill.
    await Promise.all(chats.map((c) => stack.mock.state.waitForRequest(c, 2)));
    for (const c of chats) {
      expect((await store.readOutbox(c, undefined, 10)).map((o) => o.text)).toEqual([`echo: ${c} first`]);
    }
    await doomed.kill('SIGKILL');
    for (const c of chats) stack.mock.state.setChatLatency(c, undefined);
    await stack.start('worker');

    await waitFor(
      async () => {
        for (const c of chats) if ((await store.pendingCount(c)) > 0) return false;
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: 'takeover after kill -9' },
    );

    for (const c of chats) {
      // Replies are at-least-once, yet the person got this one once: the takeover knew it.
      const outbox = await store.readOutbox(c, undefined, 10);
      expect(
        outbox.map((o) => o.text),
        c,
      ).toEqual([`echo: ${c} first`]);
      const history = await store.readHistory(c);
      expect(history.filter((m) => m.role === 'user').map((m) => m.id)).toEqual([`${c}-1`]);
      expect(sentTexts(history), c).toEqual([`echo: ${c} first`]);
      const events = await store.readEvents(c, undefined, 100);
      expect(
        events.some((e) => e.type === 'lease.takeover'),
        c,
      ).toBe(true);
      const committed = events.filter((e) => e.type === 'turn.committed');
      expect(committed.map((e) => e.data.earlierSends)).toEqual([1]);
    }
    expect(stack.mock.state.violations).toEqual([]);
  }, 60_000);
});
