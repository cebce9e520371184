import type { LanguageModelV4Prompt } from '@ai-sdk/provider';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { TurnAbortedError } from '../../src/shared/errors.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { RunningTurns } from '../../src/worker/turn/running-turns.js';
import { runTurn, type TurnOutcome } from '../../src/worker/turn/turn.js';
import { textOf } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import {
  echoScript,
  promptTranscript,
  type Script,
  scriptedModel,
  untilAborted,
  withoutContextBlock,
} from '../helpers/scripted-model.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

/**
 * A turn whose `chat_send` reached the outbox but whose commit never happened (its worker
 * stalled past the lease or was killed): the turn that takes the chat over is given those
 * replies as its own, does not send identical text again, and commits them once.
 */

const redis = testRedis();
let prefix: string;

beforeEach(() => {
  prefix = randomPrefix('earlier');
});
afterAll(async () => {
  await deleteLabel(redis, 'earlier');
  redis.disconnect();
});

/** A model that ignores what it already said and answers every user text again (a restart). */
const repeatEverything: Script = (prompt, call) => {
  if (call > 0) return { text: '' };
  const users = prompt.flatMap((m) =>
    m.role === 'user'
      ? m.content.flatMap((p) => (p.type === 'text' ? [withoutContextBlock(p.text)] : []))
      : [],
  );
  return { toolCalls: [{ name: 'chat_send', input: { text: `echo: ${users.join(' | ')}` } }] };
};

/**
 * Runs a first turn that sends its reply and then stalls past its lease (no renewal can run)
 * before it could commit; `duringStall` runs while the chat is up for grabs: the takeover.
 * Returns the stalled turn's outcome once the takeover is done.
 */
async function stalledAfterSend(
  chatKey: string,
  duringStall: () => Promise<unknown>,
  beforeStall?: () => Promise<void>,
): Promise<TurnOutcome> {
  const { model } = scriptedModel(async (prompt, call, options) => {
    if (call === 1) {
      await beforeStall?.();
      const until = Date.now() + 400;
      while (Date.now() < until) {
        /* stall: the lease (200 ms) runs out */
      }
      await duringStall();
    }
    return echoScript(prompt, call, options);
  });
  const deps = turnDeps(redis, prefix, model, { leaseMs: 200 });
  return runTurn(deps, chatKey);
}

/** A takeover with `script` on chat c1 of `texts`, run during a first turn's stall after its reply. */
async function takeoverAfterStall(script: Script, ...texts: string[]) {
  const takeover = scriptedModel(script);
  const deps = turnDeps(redis, prefix, takeover.model);
  await ingestTexts(deps.store, 'c1', ...texts);
  let takeoverRun: Promise<TurnOutcome> | undefined;
  const first = await stalledAfterSend('c1', async () => {
    takeoverRun = runTurn(deps, 'c1');
    await takeoverRun;
  });
  // The stalled turn can end first: its reply stream's next write finds the fence gone.
  const second = await takeoverRun;
  return { first, second, prompts: takeover.prompts, store: deps.store };
}

const sendsOf = (history: ChatMessage[]) =>
  history.flatMap((m) =>
    m.parts.flatMap((p) =>
      p.type === 'tool-chat_send' && (p as { output?: { status?: string } }).output?.status === 'sent'
        ? [(p as { input: { text: string } }).input.text]
        : [],
    ),
  );

const transcript = (history: ChatMessage[]) =>
  history.map((m) => (m.role === 'user' ? `user: ${textOf(m)}` : `assistant: ${sendsOf([m]).join(' / ')}`));

describe('a turn taking over after a crash between chat_send and commit', () => {
  it('gives the model the earlier reply as already sent, sends nothing again, and commits that reply once', async () => {
    const { first, second, prompts, store } = await takeoverAfterStall(echoScript, 'hi', 'how are you');
    expect(first.status).toBe('lost');
    expect(second).toMatchObject({ status: 'done', consumed: 2, sent: 0 });

    // The takeover's model saw both messages, then the reply as its own chat_send, and stopped.
    const seen = promptTranscript(prompts[0] as LanguageModelV4Prompt);
    expect(seen.slice(1)).toEqual([
      'user: hi',
      'user: how are you',
      'assistant: tool-call',
      'tool: tool-result',
    ]);
    const call = (prompts[0]!.at(-2)!.content as Array<{ type: string; input?: unknown }>)[0];
    expect(call).toMatchObject({ type: 'tool-call', input: { text: 'echo: hi | how are you' } });

    const outbox = await store.readOutbox('c1', undefined, 10);
    expect(outbox.map((o) => o.text)).toEqual(['echo: hi | how are you']);
    const history = await store.readHistory('c1');
    expect(transcript(history)).toEqual([
      'user: hi',
      'user: how are you',
      'assistant: echo: hi | how are you',
    ]);
    // History names the run that wrote the outbox item, and the commit cleared the record.
    expect(history[2]!.metadata.runId).toBe(outbox[0]!.runId);
    expect(await redis.exists(store.keys('c1').uncommitted)).toBe(0);
    const committed = (await store.readEvents('c1', undefined, 50)).filter(
      (e) => e.type === 'turn.committed',
    );
    expect(committed).toHaveLength(1);
    expect(committed[0]!.data).toMatchObject({ earlierSends: 1, sent: 0 });
  });

  it('refuses an identical chat_send as already sent (no error), so a model that restarts from scratch repeats nothing', async () => {
    const { second, prompts, store } = await takeoverAfterStall(repeatEverything, 'hi');
    expect(second).toMatchObject({ status: 'done', sent: 0 });
    // The model got a tool result telling it why, not an error.
    const result = (prompts[1]!.at(-1)!.content as Array<{ output?: { value?: unknown } }>)[0];
    expect(result?.output?.value).toMatchObject({ status: 'already-sent' });

    expect((await store.readOutbox('c1', undefined, 10)).map((o) => o.text)).toEqual(['echo: hi']);
    const history = await store.readHistory('c1');
    expect(sendsOf(history)).toEqual(['echo: hi']);
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant', 'assistant']);
  });

  it('a message that arrived after the earlier reply comes after it, and only that message is answered', async () => {
    const takeover = scriptedModel(echoScript);
    const deps = turnDeps(redis, prefix, takeover.model);
    const { store } = deps;
    await ingestTexts(store, 'c1', 'hi');

    // "later" arrives after the stalled turn sent its reply and before the takeover.
    let takeoverRun: Promise<TurnOutcome> | undefined;
    await stalledAfterSend(
      'c1',
      () => (takeoverRun = runTurn(deps, 'c1')),
      () => ingestTexts(store, 'c1', 'later'),
    );
    // The stalled turn can end first (lost), without waiting for the takeover.
    expect(await takeoverRun).toMatchObject({ status: 'done' });
    expect(promptTranscript(takeover.prompts[0]!).slice(1)).toEqual([
      'user: hi',
      'assistant: tool-call',
      'tool: tool-result',
      'user: later',
    ]);
    expect((await store.readOutbox('c1', undefined, 10)).map((o) => o.text)).toEqual([
      'echo: hi',
      'echo: later',
    ]);
    expect(transcript(await store.readHistory('c1'))).toEqual([
      'user: hi',
      'assistant: echo: hi',
      'user: later',
      'assistant: echo: later',
    ]);
  });

  it('answers up to everything the crashed turn had merged, even beyond the first read, before its reply', async () => {
    const takeover = scriptedModel(echoScript);
    // The takeover reads one pending message at first; the crashed turn had seen two.
    const deps = turnDeps(redis, prefix, takeover.model, { maxPendingPerTurn: 1 });
    const { store } = deps;
    await ingestTexts(store, 'c1', 'a', 'b');
    const [, b] = await store.readInbox('c1', 2);
    const lease = await store.acquire('c1', 'dead-worker', 50);
    if (!lease.ok) throw new Error('lease');
    const sent = await store.sendOutbox('c1', lease.fence, {
      runId: 'dead-run',
      text: 'echo: a | b',
      ts: Date.now(),
      seen: b!.streamId,
    });
    expect(sent.ok).toBe(true);
    await new Promise((r) => setTimeout(r, 80));

    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', consumed: 2, sent: 0 });
    expect(transcript(await store.readHistory('c1'))).toEqual([
      'user: a',
      'user: b',
      'assistant: echo: a | b',
    ]);
    expect(await store.pendingCount('c1')).toBe(0);
  });

  it('a turn that commits leaves nothing for the next one: its own replies are not shown as earlier sends', async () => {
    const { model, prompts } = scriptedModel(echoScript);
    const deps = turnDeps(redis, prefix, model);
    await ingestTexts(deps.store, 'c1', 'one');
    await runTurn(deps, 'c1');
    await ingestTexts(deps.store, 'c1', 'two');
    await runTurn(deps, 'c1');
    // Turn 2 saw turn 1 as committed history (one assistant message), nothing added.
    expect(promptTranscript(prompts[2]!).slice(1)).toEqual([
      'user: one',
      'assistant: tool-call',
      'tool: tool-result',
      'user: two',
    ]);
    expect(sendsOf(await deps.store.readHistory('c1'))).toEqual(['echo: one', 'echo: two']);
    expect(await redis.exists(deps.store.keys('c1').uncommitted)).toBe(0);
  });

  it('the same chat_send run twice (a client resending it after a Redis restart) writes one outbox item', async () => {
    const { store } = turnDeps(redis, prefix, scriptedModel().model);
    await ingestTexts(store, 'c1', 'hi');
    const lease = await store.acquire('c1', 'w', 5000);
    if (!lease.ok) throw new Error('lease');
    const item = { runId: 'r1', text: 'echo: hi', ts: Date.now(), seen: '0-1' };
    const first = await store.sendOutbox('c1', lease.fence, item);
    const again = await store.sendOutbox('c1', lease.fence, item);
    expect(again).toEqual(first);
    expect((await store.readOutbox('c1', undefined, 10)).map((o) => o.text)).toEqual(['echo: hi']);
    // Another run's identical text is its own item (chat_send refuses it before it gets here).
    await store.sendOutbox('c1', lease.fence, { ...item, runId: 'r2' });
    expect(await store.readOutbox('c1', undefined, 10)).toHaveLength(2);
  });

  it('a turn stopped by shutdown after its chat_send: the retry continues from that reply', async () => {
    const running = new RunningTurns();
    const stopped = scriptedModel(async (prompt, call, options) => {
      if (call === 1) {
        running.stopAll('worker shutting down');
        await untilAborted(options);
      }
      return echoScript(prompt, call, options);
    });
    const deps = { ...turnDeps(redis, prefix, stopped.model), running };
    await ingestTexts(deps.store, 'c1', 'hi');
    await expect(runTurn(deps, 'c1')).rejects.toBeInstanceOf(TurnAbortedError);

    const retry = turnDeps(redis, prefix, scriptedModel(repeatEverything).model);
    expect(await runTurn(retry, 'c1')).toMatchObject({ status: 'done', sent: 0 });
    expect((await retry.store.readOutbox('c1', undefined, 10)).map((o) => o.text)).toEqual(['echo: hi']);
    expect(sendsOf(await retry.store.readHistory('c1'))).toEqual(['echo: hi']);
  });

  it('a closing remark in plain text after the earlier replies is not sent as a reply of its own', async () => {
    const { second, store } = await takeoverAfterStall(() => ({ text: 'All answered above.' }), 'hi');
    expect(second).toMatchObject({ status: 'done', sent: 0 });
    expect((await store.readOutbox('c1', undefined, 10)).map((o) => o.text)).toEqual(['echo: hi']);
  });
});
