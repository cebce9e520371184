import { describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/mock-llm/state.js';
import { ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { textOf } from '../helpers/messages.js';
import { postMessage } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { type Stack, useStack } from '../helpers/stack.js';

interface WireMessage {
  role: string;
  content?: string | Array<{ type: string; text?: string }> | null;
}

const wireText = (m: WireMessage) =>
  typeof m.content === 'string' ? m.content : (m.content ?? []).map((p) => p.text ?? '').join('');

/** The conversation of one model request as `role: words` lines (users without their context block). */
function transcript(request: RecordedRequest): string[] {
  return (request.messages as WireMessage[])
    .filter((m) => m.role !== 'system')
    .map((m) => `${m.role}: ${wireText(m).replace(/^\[sent [^\]\n]*\]\n/, '')}`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits (generously: a loaded machine) until the chat has committed `n` turns; returns their events. */
async function committed(stack: Stack, chatKey: string, n = 1) {
  return waitFor(
    async () => {
      const events = await stack.store.readEvents(chatKey, undefined, 100);
      const commits = events.filter((e) => e.type === 'turn.committed');
      return commits.length >= n && (await stack.store.pendingCount(chatKey)) === 0 ? events : undefined;
    },
    { what: `${n} committed turn(s) of ${chatKey}`, timeoutMs: 60_000 },
  );
}

const outboxOf = async (stack: Stack, chatKey: string) =>
  (await stack.store.readOutbox(chatKey, undefined, 20)).map((o) => o.text);

// Long enough that messages a loaded machine posts 300 ms apart always fall within it.
const DEBOUNCE_MS = 4000;

describe('debounce across processes (LANE_DEBOUNCE_MS)', () => {
  const stack = useStack('e2e-debounce', {
    roles: ['ingress', 'worker'],
    env: { LANE_DEBOUNCE_MS: String(DEBOUNCE_MS) },
  });

  it('three messages 300 ms apart to an idle chat give the model one first request holding all three, and one reply', async () => {
    const ingress = stack.ingressUrl();
    for (const [i, text] of ['hi', 'I have a problem', 'my order A7 never came'].entries()) {
      if (i > 0) await sleep(300);
      await postMessage(ingress, 'burst', `b${i}`, text);
    }
    const events = await committed(stack, 'burst');
    const requests = stack.mock.state.recorded('burst');
    expect(transcript(requests[0]!)).toEqual([
      'user: hi',
      'user: I have a problem',
      'user: my order A7 never came',
    ]);
    expect(await outboxOf(stack, 'burst')).toEqual(['echo: hi | I have a problem | my order A7 never came']);
    expect(events.filter((e) => e.type === 'turn.committed')).toHaveLength(1);
    // The reply's step and the closing step: two model calls for the whole burst.
    expect(requests).toHaveLength(2);
  }, 90_000);

  it('a message during a running turn is merged into it as without debounce', async () => {
    const ingress = stack.ingressUrl();
    stack.mock.state.hold('busy');
    await postMessage(ingress, 'busy', 'm1', 'book a table');
    await stack.mock.state.waitForRequest('busy', 1);
    await postMessage(ingress, 'busy', 'm2', 'for four people');
    stack.mock.state.release('busy');

    const events = await committed(stack, 'busy');
    const commits = events.filter((e) => e.type === 'turn.committed');
    expect(commits).toHaveLength(1);
    expect(commits[0]!.data).toMatchObject({ consumed: 2, merged: 1, messageIds: ['m1', 'm2'] });
    const second = transcript(stack.mock.state.recorded('busy')[1]!);
    expect(second.at(-2)).toMatch(/^tool: /);
    expect(second.at(-1)).toBe('user: for four people');
    expect(await outboxOf(stack, 'busy')).toEqual(['echo: book a table', 'echo: for four people']);
  }, 90_000);

  it('survives its ingress: killed during the wait, the turn still comes, and a message through a second ingress joins it', async () => {
    const first = stack.procs.find((p) => p.url)!;
    const second = await stack.start('ingress');
    await postMessage(first.url!, 'restart', 'r1', 'hello');
    await first.kill('SIGKILL');
    // No ingress holds anything: the wait is the turn job's time in Redis.
    await postMessage(second.url!, 'restart', 'r2', 'are you there');
    await committed(stack, 'restart');
    const requests = stack.mock.state.recorded('restart');
    expect(transcript(requests[0]!)).toEqual(['user: hello', 'user: are you there']);
    expect(await outboxOf(stack, 'restart')).toEqual(['echo: hello | are you there']);
  }, 90_000);
});

/**
 * How long a held step stays held after a message that must not cut it: a worker that would
 * wrongly interrupt hears of the message within it (a broken cap shows as a step restarted
 * early). It can only make a broken cap pass, never a working one fail.
 */
const HEARING_MS = 1000;

describe('interrupt across processes (LANE_POLICY=interrupt)', () => {
  const stack = useStack('e2e-interrupt', {
    roles: ['ingress', 'worker'],
    // Messages sent with channel telegram may interrupt a turn once; the others three times.
    // Every turn streams: these tests read what the live view showed of a cut step.
    env: { LANE_POLICY: 'interrupt', TELEGRAM_LANE_MAX_INTERRUPTS: '1', REPLY_STREAMING: 'always' },
  });

  it('a second message aborts a slow model step; the restarted request holds both and nothing of the first step is sent', async () => {
    const ingress = stack.ingressUrl();
    const { state } = stack.mock;
    // The step held from its first piece: the second message lands mid-answer, and only an
    // interrupt can bring the next request.
    state.chunkGates.hold('cut');
    try {
      await postMessage(ingress, 'cut', 'm1', 'book a table');
      await state.waitForRequest('cut', 1);
      await postMessage(ingress, 'cut', 'm2', 'for four people');
      await waitFor(async () => state.recorded('cut').length >= 2, {
        what: 'the restarted request',
        timeoutMs: 30_000,
      });
    } finally {
      state.chunkGates.release('cut');
    }
    const events = await committed(stack, 'cut');
    const requests = state.recorded('cut');
    expect(transcript(requests[0]!)).toEqual(['user: book a table']);
    expect(transcript(requests[1]!)).toEqual(['user: book a table', 'user: for four people']);
    // The first step was writing "echo: book a table" when it was cut: never sent.
    expect(await outboxOf(stack, 'cut')).toEqual(['echo: book a table | for four people']);
    expect(events.filter((e) => e.type === 'lane.interrupted').map((e) => e.data)).toEqual([
      expect.objectContaining({ step: 0, messageIds: ['m2'], interrupts: 1 }),
    ]);
    const commits = events.filter((e) => e.type === 'turn.committed');
    expect(commits).toHaveLength(1);
    expect(commits[0]!.data).toMatchObject({ consumed: 2, merged: 1, messageIds: ['m1', 'm2'] });
    const history = await stack.store.readHistory('cut');
    expect(history.map((m) => (m.role === 'user' ? `user:${textOf(m)}` : 'assistant'))).toEqual([
      'user:book a table',
      'user:for four people',
      'assistant',
    ]);

    // What a reader of the live view got: every part it saw open is closed, a cut one before
    // the restarted step's begins; the last part is the reply; the merged message is named.
    const replies = new ReplyStreams(stack.redis, {
      prefix: stack.prefix,
      maxEvents: 100,
      maxLen: 1000,
      ttlMs: 60_000,
    });
    const runId = String(events.find((e) => e.type === 'lane.interrupted')!.data.runId);
    const entries = await replies.read('cut', runId);
    const chunks = entries.flatMap((e) => (e.kind === 'chunk' ? [e.chunk] : []));
    const open = new Set<string>();
    const texts = new Map<string, string>();
    const order: string[] = [];
    for (const c of chunks) {
      const id = String(c.id ?? '');
      if (c.type === 'text-start') {
        expect(open.size, 'a part starts while another is open').toBe(0);
        open.add(id);
        order.push(id);
        texts.set(id, '');
      } else if (c.type === 'text-delta') texts.set(id, `${texts.get(id)}${String(c.delta)}`);
      else if (c.type === 'text-end') open.delete(id);
    }
    expect(open.size).toBe(0);
    expect(texts.get(order.at(-1)!)).toBe('echo: book a table | for four people');
    expect(chunks.at(-1)).toMatchObject({ type: 'finish' });
    expect(chunks.some((c) => c.type === 'abort')).toBe(false);
    expect(entries.some((e) => e.kind === 'answers' && e.messageIds.includes('m2'))).toBe(true);
  }, 90_000);

  it('holds the cap: past LANE_MAX_INTERRUPTS (per channel) a new message waits for the step end and is merged', async () => {
    const ingress = stack.ingressUrl();
    const { state } = stack.mock;
    const telegram = { channel: 'telegram' };
    // Each step held from its first piece: every message lands mid-answer.
    state.chunkGates.hold('capped');
    try {
      await postMessage(ingress, 'capped', 'c1', 'one', telegram);
      await state.waitForRequest('capped', 1);
      await postMessage(ingress, 'capped', 'c2', 'two', telegram);
      await waitFor(async () => state.recorded('capped').length >= 2, {
        what: 'the restarted request',
        timeoutMs: 30_000,
      });
      // The restarted step is held too: this one arrives mid-answer, past the cap of one.
      await postMessage(ingress, 'capped', 'c3', 'three', telegram);
      await sleep(HEARING_MS);
      expect(state.recorded('capped'), 'the third message cut the held step').toHaveLength(2);
    } finally {
      state.chunkGates.release('capped');
    }
    await waitFor(async () => state.recorded('capped').length >= 3, {
      what: 'the step after the send',
      timeoutMs: 60_000,
    });
    const events = await committed(stack, 'capped');
    const requests = state.recorded('capped').map(transcript);
    expect(requests[1]).toEqual(['user: one', 'user: two']);
    // Not cut: the step finished its send, and the third message came after its result.
    expect(requests[2]!.slice(0, 2)).toEqual(['user: one', 'user: two']);
    expect(requests[2]![2]).toMatch(/^assistant: /);
    expect(requests[2]!.at(-1)).toBe('user: three');
    expect(await outboxOf(stack, 'capped')).toEqual(['echo: one | two', 'echo: three']);
    expect(events.filter((e) => e.type === 'lane.interrupted')).toHaveLength(1);
  }, 120_000);
});
