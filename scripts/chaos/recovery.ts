import type { ChatState } from '../../src/loadtest/chat-state.js';

/**
 * Time to recover after each worker kill, from the chats' own events (read by the load test
 * through the HTTP API): the chats the killed worker held are those whose lease another
 * worker later took over from it (`lease.takeover`, previous owner `<host>:<pid>:<run>`).
 * A held chat waited for recovery when messages acknowledged before the kill were not yet
 * consumed by a commit before it (a worker killed between its commit and its lease release
 * held the chat with nothing left to do). Two clocks per waiting chat: until another worker
 * took it over and until its next turn committed (the user's messages answered, queue wait
 * included). A kill has recovered when the last of its waiting chats has.
 */

export interface Kill {
  pid: number;
  /** Epoch ms. */
  at: number;
}

export interface KillRecovery {
  pid: number;
  at: string;
  /** Chats whose lease the killed worker held. */
  heldChats: number;
  /** Of those, chats with messages waiting at the kill: the ones timed below. */
  waitingChats: number;
  /** Seconds from the kill until every held chat was taken over by another worker. */
  takenOverAfterS: number | null;
  /** Seconds from the kill until every held chat committed a turn again; null if one never did. */
  recoveredAfterS: number | null;
  /** Per held chat, seconds until its next commit (sorted); `null` entries never recovered. */
  perChatS: Array<number | null>;
}

const seconds = (ms: number) => Math.round(ms / 10) / 100;

type ChatEvents = Pick<ChatState, 'key' | 'takeovers' | 'commits'> & {
  messages: Array<Pick<ChatState['messages'][number], 'ackAt'>>;
};

/** `startedAt`: epoch ms of the load test's start, which its message times count from. */
export function recoveryAfterKills(
  kills: Kill[],
  chats: ChatEvents[],
  host: string,
  startedAt: number,
): KillRecovery[] {
  return kills.map((kill) => {
    const owner = `${host}:${kill.pid}:`;
    const perChat: Array<number | null> = [];
    let held = 0;
    let takenOver = 0;
    for (const chat of chats) {
      const takeover = chat.takeovers.find((t) => t.previousOwner.startsWith(owner));
      if (!takeover) continue;
      held++;
      const ackedBefore = chat.messages.filter(
        (m) => m.ackAt !== undefined && startedAt + m.ackAt < kill.at,
      ).length;
      const consumedBefore = chat.commits.filter((c) => c.ts < kill.at).reduce((n, c) => n + c.consumed, 0);
      if (consumedBefore >= ackedBefore) continue;
      takenOver = Math.max(takenOver, takeover.ts - kill.at);
      const next = chat.commits.filter((c) => c.ts > kill.at).reduce((m, c) => Math.min(m, c.ts), Infinity);
      perChat.push(Number.isFinite(next) ? seconds(next - kill.at) : null);
    }
    perChat.sort((a, b) => (a ?? Infinity) - (b ?? Infinity));
    const recovered =
      perChat.length === 0 ? 0 : perChat.includes(null) ? null : Math.max(...(perChat as number[]));
    return {
      pid: kill.pid,
      at: new Date(kill.at).toISOString(),
      heldChats: held,
      waitingChats: perChat.length,
      takenOverAfterS: seconds(takenOver),
      recoveredAfterS: recovered,
      perChatS: perChat,
    };
  });
}
