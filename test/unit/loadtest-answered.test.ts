import { describe, expect, it } from 'vitest';
import { ChatState, type MessageRecord } from '../../src/loadtest/chat-state.js';

const record = (index: number): MessageRecord => ({
  chat: 0,
  index,
  id: `m${index}`,
  text: 'hi',
  attempts: 1,
  outcome: 'accepted',
});

let seq = 0;
const committed = (data: Record<string, unknown>) => ({
  id: `${++seq}-0`,
  type: 'turn.committed',
  ts: seq,
  data: { runId: `r${seq}`, ...data },
});

function acked(chat: ChatState, ...indexes: number[]): void {
  for (const i of indexes) chat.noteAcked(record(i), `m${i}`);
}

describe('loadtest: when a chat counts as answered', () => {
  it('a commit seen, lost in a failover and made again by another turn does not answer a later message', () => {
    const chat = new ChatState(0, 'c');
    acked(chat, 1, 2);
    // Seen on the old primary, then lost with it; the next turn answers m1 and m2 again.
    chat.applyEvents([committed({ consumed: 2, messageIds: ['m1', 'm2'] })]);
    acked(chat, 3);
    chat.applyEvents([committed({ consumed: 2, messageIds: ['m1', 'm2'] })]);
    // The sum of `consumed` (4) passes the acks (3); m3 is still waiting for its turn.
    expect(chat.consumed).toBeGreaterThanOrEqual(chat.acked);
    expect(chat.allConsumed).toBe(false);
    expect(chat.answered).toBe(false);

    chat.applyEvents([committed({ consumed: 1, messageIds: ['m3'] })]);
    expect(chat.answered).toBe(true);
  });

  it('a message acknowledged only after its commit was seen (a retried send) is answered', () => {
    const chat = new ChatState(0, 'c');
    chat.applyEvents([committed({ consumed: 1, messageIds: ['m1'] })]);
    acked(chat, 1);
    expect(chat.answered).toBe(true);
  });

  it('an acknowledged message no commit names keeps the chat unanswered', () => {
    const chat = new ChatState(0, 'c');
    acked(chat, 1, 2);
    chat.applyEvents([committed({ consumed: 1, messageIds: ['m1'] })]);
    expect(chat.answered).toBe(false);
  });

  it('without messageIds on the events (an older deployment) it falls back to the count', () => {
    const chat = new ChatState(0, 'c');
    acked(chat, 1, 2);
    chat.applyEvents([committed({ consumed: 1 })]);
    expect(chat.answered).toBe(false);
    chat.applyEvents([committed({ consumed: 1 })]);
    expect(chat.answered).toBe(true);
  });
});
