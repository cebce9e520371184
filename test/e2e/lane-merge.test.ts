import { describe, expect, it } from 'vitest';
import { textOf } from '../helpers/messages.js';
import { postMessage } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

interface WireMessage {
  role: string;
  content?: string | Array<{ type: string; text?: string }> | null;
}

const wireText = (m: WireMessage) =>
  typeof m.content === 'string' ? m.content : (m.content ?? []).map((p) => p.text ?? '').join('');

describe('lane merge across processes', () => {
  const stack = useStack('e2e-merge', { roles: ['ingress', 'worker'] });
  const { store } = stack;

  it('a message posted while the model is mid-turn is seen in that turn and stored before the answer to it', async () => {
    const ingress = stack.ingressUrl();
    stack.mock.state.hold('merge');
    await postMessage(ingress, 'merge', 'm1', 'book a table');
    await stack.mock.state.waitForRequest('merge', 1);
    await postMessage(ingress, 'merge', 'm2', 'for four people');
    stack.mock.state.release('merge');

    await waitFor(
      async () =>
        (await store.pendingCount('merge')) === 0 &&
        (await store.readHistoryWindow('merge', 1)).messages[0]?.role === 'assistant',
      { what: 'merged turn committed' },
    );

    const requests = stack.mock.state.recorded('merge');
    // Step 2 of the same turn: after the chat_send result, the new message as a user message.
    const second = requests[1]!.messages as WireMessage[];
    expect(second.at(-1)).toMatchObject({ role: 'user' });
    // With its context block, as every later turn's history shows it (docs/prompt-caching.md).
    expect(wireText(second.at(-1)!)).toMatch(/^\[sent \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\]\nfor four people$/);
    expect(second.at(-2)?.role).toBe('tool');

    const history = await store.readHistory('merge');
    expect(history.map((m) => (m.role === 'user' ? `user:${textOf(m)}` : 'assistant'))).toEqual([
      'user:book a table',
      'assistant',
      'user:for four people',
      'assistant',
    ]);
    const commits = (await store.readEvents('merge', undefined, 100)).filter(
      (e) => e.type === 'turn.committed',
    );
    expect(commits).toHaveLength(1);
    // The merged message is answered by the same turn, and its event says so by id.
    expect(commits[0]!.data).toMatchObject({ consumed: 2, merged: 1, messageIds: ['m1', 'm2'] });
    const outbox = (await store.readOutbox('merge', undefined, 10)).map((o) => o.text);
    expect(outbox).toEqual(['echo: book a table', 'echo: for four people']);
    // The worker's line for the turn (docs/operations.md, "Logs") counts both, one merged.
    const worker = stack.procs.find((p) => !p.url)!;
    const line = await waitFor(
      async () => worker.logs.find((l) => l.msg === 'turn ended' && l.chatKey === 'merge'),
      {
        what: 'the turn line',
      },
    );
    expect(line).toMatchObject({ outcome: 'done', messages: 2, merged: 1, sent: 2 });
  }, 30_000);
});
