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

describe('chaos: recovery after a worker kill', () => {
  const kill = { pid: 42, at: 10_000 };

  it('counts the chats the killed worker held and the time until the last of them was taken over and answered', () => {
    const chats = [
      // Held by pid 42: taken over at +3 s, answered at +4 s.
      {
        key: 'a',
        takeovers: [{ ts: 13_000, previousOwner: 'host:42:run-a', owner: 'host:7:x' }],
        commits: [commit(9_000), commit(14_000)],
      },
      // Held by pid 42: taken over at +3.5 s, answered at +6 s.
      {
        key: 'b',
        takeovers: [{ ts: 13_500, previousOwner: 'host:42:run-b', owner: 'host:7:y' }],
        commits: [commit(16_000), commit(20_000)],
      },
      // Another worker's chat, and pid 420 (a prefix of no interest): not counted.
      {
        key: 'c',
        takeovers: [{ ts: 12_000, previousOwner: 'host:420:run-c', owner: 'host:7:z' }],
        commits: [commit(30_000)],
      },
      { key: 'd', takeovers: [], commits: [commit(11_000)] },
    ];
    expect(recoveryAfterKills([kill], chats, 'host')).toEqual([
      {
        pid: 42,
        at: new Date(10_000).toISOString(),
        heldChats: 2,
        takenOverAfterS: 3.5,
        recoveredAfterS: 6,
        perChatS: [4, 6],
      },
    ]);
  });

  it('a held chat that never committed again makes the kill unrecovered; a kill between turns held nothing', () => {
    const chats = [
      { key: 'a', takeovers: [{ ts: 12_000, previousOwner: 'host:42:r', owner: 'host:7:s' }], commits: [] },
    ];
    expect(recoveryAfterKills([kill], chats, 'host')[0]).toMatchObject({
      heldChats: 1,
      recoveredAfterS: null,
      perChatS: [null],
    });
    expect(recoveryAfterKills([{ pid: 99, at: 10_000 }], chats, 'host')[0]).toMatchObject({
      heldChats: 0,
      recoveredAfterS: 0,
    });
  });
});
