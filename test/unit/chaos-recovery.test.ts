import { describe, expect, it } from 'vitest';
import { recoveryAfterKills } from '../../scripts/chaos/recovery.js';
import type { CommitEvent } from '../../src/loadtest/chat-state.js';

const commit = (ts: number): CommitEvent => ({
  runId: `r${ts}`,
  ts,
  consumed: 1,
  merged: 0,
  ms: 10,
  fence: undefined,
  worker: undefined,
});

// Load-test times count from START (epoch ms): a message acknowledged at epoch e has ackAt e − START.
const START = 5_000;
const acked = (...epochs: number[]) => epochs.map((e) => ({ ackAt: e - START }));
const takeover = (ts: number, previousOwner: string) => [{ ts, previousOwner, owner: 'host:7:next' }];

describe('chaos: recovery after a worker kill', () => {
  const kill = { pid: 42, at: 10_000 };

  it('times the held chats with messages waiting, until the last was taken over and answered', () => {
    const chats = [
      // Held by pid 42, one message waiting: taken over at +3 s, answered at +4 s.
      {
        key: 'a',
        messages: acked(8_000, 9_500),
        takeovers: takeover(13_000, 'host:42:run-a'),
        commits: [commit(9_000), commit(14_000)],
      },
      // Held by pid 42: taken over at +3.5 s, answered at +6 s.
      {
        key: 'b',
        messages: acked(9_000),
        takeovers: takeover(13_500, 'host:42:run-b'),
        commits: [commit(16_000), commit(20_000)],
      },
      // Held by pid 42, but its only message was committed before the kill: nothing to recover.
      {
        key: 'e',
        messages: acked(8_000),
        takeovers: takeover(13_900, 'host:42:run-e'),
        commits: [commit(9_900)],
      },
      // Another worker's chat (pid 420 shares a prefix with 42 only as text), and an untouched chat.
      {
        key: 'c',
        messages: acked(9_000),
        takeovers: takeover(12_000, 'host:420:run-c'),
        commits: [commit(30_000)],
      },
      { key: 'd', messages: acked(9_000), takeovers: [], commits: [commit(11_000)] },
    ];
    expect(recoveryAfterKills([kill], chats, 'host', START)).toEqual([
      {
        pid: 42,
        at: new Date(10_000).toISOString(),
        heldChats: 3,
        waitingChats: 2,
        takenOverAfterS: 3.5,
        recoveredAfterS: 6,
        perChatS: [4, 6],
      },
    ]);
  });

  it('a waiting chat that never committed again makes the kill unrecovered; a kill between turns held nothing', () => {
    const chats = [
      { key: 'a', messages: acked(9_000), takeovers: takeover(12_000, 'host:42:r'), commits: [] },
    ];
    expect(recoveryAfterKills([kill], chats, 'host', START)[0]).toMatchObject({
      heldChats: 1,
      waitingChats: 1,
      recoveredAfterS: null,
      perChatS: [null],
    });
    expect(recoveryAfterKills([{ pid: 99, at: 10_000 }], chats, 'host', START)[0]).toMatchObject({
      heldChats: 0,
      waitingChats: 0,
      recoveredAfterS: 0,
    });
  });
});
