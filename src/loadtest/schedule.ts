import type { LoadtestOptions } from './options.js';
import { seededRandom } from './random.js';

/**
 * The load shape, computed up front from the seed alone: which chat gets which messages,
 * grouped into steps (a single message or a burst), when each step starts (open model) or
 * how long the user thinks before it (closed loop). Same seed and sizes → the same schedule.
 */

export interface Step {
  /** Index of the step's first message within its chat. */
  first: number;
  count: number;
  /** When each message of the step goes out, relative to the step's start (bursts spread). */
  offsetsMs: number[];
  /** Closed loop: pause after the previous step's reply; 0 for a chat's first step. */
  thinkMs: number;
}

export interface Arrival {
  /** Milliseconds after the start of the run. */
  atMs: number;
  chat: number;
  step: number;
}

export interface Schedule {
  mode: 'open' | 'closed';
  /** Steps per chat, in the chat's order. */
  chats: Step[][];
  /** Open model only: every step of every chat, in arrival order. */
  arrivals: Arrival[];
  messages: number;
  steps: number;
  bursts: number;
  /** Open model: when the last step arrives; closed loop: 0 (it depends on the replies). */
  lastArrivalMs: number;
}

export type ScheduleInput = Pick<
  LoadtestOptions,
  'mode' | 'chats' | 'messages' | 'rate' | 'thinkMs' | 'burstShare' | 'burstSize' | 'burstWindowMs' | 'seed'
> &
  Partial<Pick<LoadtestOptions, 'profile'>>;

/** `--profile typing`: a burst's size and the pause before each of its later messages. */
export const TYPING = { minSize: 2, maxSize: 4, minGapMs: 300, maxGapMs: 900 } as const;

/**
 * A typing burst's size: 2-4 messages, never leaving a single message for the chat's last
 * step (a chat of one message sends it alone).
 */
function typingSize(random: ReturnType<typeof seededRandom>, left: number): number {
  if (left <= TYPING.maxSize) return left;
  return random.int(TYPING.minSize, Math.min(TYPING.maxSize, left - TYPING.minSize));
}

/** Offsets of a typing burst's messages: each 300-900 ms after the one before. */
function typingOffsets(random: ReturnType<typeof seededRandom>, count: number): number[] {
  const offsets = [0];
  for (let j = 1; j < count; j++)
    offsets.push(offsets[j - 1]! + random.int(TYPING.minGapMs, TYPING.maxGapMs));
  return offsets;
}

export function buildSchedule(input: ScheduleInput): Schedule {
  const random = seededRandom(input.seed);
  const chats: Step[][] = [];
  let steps = 0;
  let bursts = 0;
  const [thinkMin, thinkMax] = input.thinkMs;
  for (let c = 0; c < input.chats; c++) {
    const plan: Step[] = [];
    for (let m = 0; m < input.messages; ) {
      const left = input.messages - m;
      let count: number;
      let offsetsMs: number[];
      if (input.profile === 'typing') {
        count = typingSize(random, left);
        offsetsMs = typingOffsets(random, count);
      } else {
        count = left >= 2 && random.chance(input.burstShare) ? Math.min(input.burstSize, left) : 1;
        const gap = count > 1 ? input.burstWindowMs / (count - 1) : 0;
        offsetsMs = Array.from({ length: count }, (_, j) => Math.round(j * gap));
      }
      plan.push({
        first: m,
        count,
        offsetsMs,
        thinkMs: plan.length === 0 || input.mode === 'open' ? 0 : random.int(thinkMin, thinkMax),
      });
      if (count > 1) bursts++;
      m += count;
    }
    steps += plan.length;
    chats.push(plan);
  }

  const arrivals: Arrival[] = [];
  let lastArrivalMs = 0;
  if (input.mode === 'open') {
    // A uniformly random interleaving that keeps each chat's own order: shuffle one token
    // per step, then the k-th token of chat c is c's step k.
    const tokens: number[] = [];
    for (let c = 0; c < chats.length; c++) for (let s = 0; s < chats[c]!.length; s++) tokens.push(c);
    for (let i = tokens.length - 1; i > 0; i--) {
      const j = random.int(0, i);
      [tokens[i], tokens[j]] = [tokens[j]!, tokens[i]!];
    }
    // Steps arrive as a Poisson process whose message rate is `rate`.
    const total = input.chats * input.messages;
    const meanGapMs = (1000 * total) / (input.rate * tokens.length);
    const next = new Array<number>(chats.length).fill(0);
    let t = 0;
    for (const chat of tokens) {
      t += random.exponential(meanGapMs);
      arrivals.push({ atMs: Math.round(t), chat, step: next[chat]!++ });
    }
    lastArrivalMs = arrivals.at(-1)?.atMs ?? 0;
  }
  return {
    mode: input.mode,
    chats,
    arrivals,
    messages: input.chats * input.messages,
    steps,
    bursts,
    lastArrivalMs,
  };
}

export function chatKeyOf(runId: string, chat: number): string {
  return `lt-${runId}-${chat}`;
}

export function messageIdOf(runId: string, chat: number, index: number): string {
  return `lt-${runId}-${chat}-${index}`;
}

const FILLER = 'the quick brown fox jumps over a lazy dog while chatlane keeps every lane in order ';

/** Names the message (so a reply echoing it is traceable), padded to `bytes`. */
export function messageTextOf(runId: string, chat: number, index: number, bytes: number): string {
  const head = `loadtest ${runId} chat ${chat} message ${index}: `;
  if (head.length >= bytes) return head.slice(0, bytes);
  const offset = (chat * 7 + index * 13) % FILLER.length;
  let body = '';
  while (body.length < bytes - head.length) body += FILLER.slice(offset) + FILLER.slice(0, offset);
  return head + body.slice(0, bytes - head.length);
}
