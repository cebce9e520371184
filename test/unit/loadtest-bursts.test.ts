import { describe, expect, it } from 'vitest';
import { burstReport } from '../../src/loadtest/bursts.js';
import { ChatState } from '../../src/loadtest/chat-state.js';
import { type LoadtestOptions, parseLoadtestArgs } from '../../src/loadtest/options.js';
import { buildSchedule, type Schedule, TYPING } from '../../src/loadtest/schedule.js';

function parse(...argv: string[]): LoadtestOptions {
  const opts = parseLoadtestArgs(argv);
  if (opts === 'help') throw new Error('unexpected help');
  return opts;
}

const URL_ARG = ['--url', 'http://127.0.0.1:3000'];

describe('--profile typing', () => {
  const typing = parse(...URL_ARG, '--profile', 'typing', '--chats', '200', '--messages', '9');

  it('plans every step as a burst of 2-4 messages, each 300-900 ms after the one before', () => {
    const s = buildSchedule(typing);
    const sizes = new Set<number>();
    for (const steps of s.chats) {
      let next = 0;
      for (const step of steps) {
        expect(step.first).toBe(next);
        expect(step.count).toBeGreaterThanOrEqual(TYPING.minSize);
        expect(step.count).toBeLessThanOrEqual(TYPING.maxSize);
        sizes.add(step.count);
        expect(step.offsetsMs[0]).toBe(0);
        for (let j = 1; j < step.count; j++) {
          const gap = step.offsetsMs[j]! - step.offsetsMs[j - 1]!;
          expect(gap).toBeGreaterThanOrEqual(TYPING.minGapMs);
          expect(gap).toBeLessThanOrEqual(TYPING.maxGapMs);
        }
        next += step.count;
      }
      expect(next).toBe(9);
    }
    expect([...sizes].sort()).toEqual([2, 3, 4]);
    expect(s.bursts).toBe(s.steps);
  });

  it('is the same for the same seed, whatever the lane policy being compared', () => {
    expect(JSON.stringify(buildSchedule({ ...typing }))).toBe(JSON.stringify(buildSchedule(typing)));
    expect(JSON.stringify(buildSchedule({ ...typing, seed: 9 }))).not.toBe(
      JSON.stringify(buildSchedule(typing)),
    );
  });

  it('leaves the steady profile’s schedule as it was', () => {
    const steady = parse(...URL_ARG, '--chats', '50', '--messages', '6');
    expect(steady.profile).toBe('steady');
    const s = buildSchedule(steady);
    expect(s.chats.flat().some((step) => step.count === 1)).toBe(true);
  });

  it('refuses an unknown profile', () => {
    expect(() => parseLoadtestArgs([...URL_ARG, '--profile', 'bursty'])).toThrow(
      /--profile must be steady or typing/,
    );
  });
});

describe('burstReport', () => {
  /** One chat, two bursts: messages at 0, 500 (burst 1) and 5000, 5400, 6000 (burst 2). */
  function chatWith(replyTimes: number[]): { schedule: Schedule; chat: ChatState } {
    const schedule: Schedule = {
      mode: 'closed',
      chats: [
        [
          { first: 0, count: 2, offsetsMs: [0, 500], thinkMs: 0 },
          { first: 2, count: 3, offsetsMs: [0, 400, 1000], thinkMs: 2000 },
        ],
      ],
      arrivals: [],
      messages: 5,
      steps: 2,
      bursts: 2,
      lastArrivalMs: 0,
    };
    const chat = new ChatState(0, 'lt-x-0');
    [0, 500, 5000, 5400, 6000].forEach((sentAt, index) => {
      chat.messages.push({
        chat: 0,
        index,
        id: `m${index}`,
        text: '',
        attempts: 1,
        outcome: 'accepted',
        sentAt,
      });
    });
    chat.applyOutbox(
      replyTimes.map((t, i) => ({ id: `${i + 1}-0`, runId: 'r', text: 'reply', ts: t })),
      0,
    );
    // applyOutbox stamps one time; give each reply its own.
    replyTimes.forEach((t, i) => {
      chat.outbox.get(`${i + 1}-0`)!.seenAt = t;
    });
    return { schedule, chat };
  }

  it('counts replies per burst, those given while the person still typed, and the wait for the last message’s reply', () => {
    // Burst 1: a reply at 300 (before its last message, 500), one at 1500. Burst 2: one at 7200.
    const { schedule, chat } = chatWith([300, 1500, 7200]);
    // The reply that answered each burst's last message (verify.ts reads it from the history).
    const answered = new Map([
      ['m1', 1500],
      ['m4', 7200],
    ]);
    const rep = burstReport(schedule, [chat], answered, 8);
    expect(rep).toMatchObject({
      bursts: 2,
      messagesPerBurst: 2.5,
      modelCallsPerBurst: 4,
      earlyReplies: 1,
      lastMessageUnanswered: 0,
    });
    expect(rep.repliesPerBurst.mean).toBe(1.5);
    // 1500 − 500 and 7200 − 6000.
    expect(rep.lastMessageToReplyMs).toMatchObject({ count: 2, min: 1000, max: 1200 });
  });

  it('a reply given before the last message is early, not that message’s answer', () => {
    // Burst 1 was answered at 200, while the person still typed; its last message never was.
    const { schedule, chat } = chatWith([200, 5500, 6500]);
    const rep = burstReport(schedule, [chat], new Map([['m4', 6500]]), undefined);
    expect(rep.modelCallsPerBurst).toBeNull();
    expect(rep.earlyReplies).toBe(2);
    expect(rep.lastMessageUnanswered).toBe(1);
    expect(rep.lastMessageToReplyMs).toMatchObject({ count: 1, max: 500 });
  });
});
