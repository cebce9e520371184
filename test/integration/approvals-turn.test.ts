import { afterAll, describe, expect, it } from 'vitest';
import { answerApproval, listApprovals } from '../../src/shared/store/approvals.js';
import { beginOnce, DEFAULT_ONCE_LIMITS, endOnce } from '../../src/shared/store/once.js';
import { approvalOnceKey, INTERRUPTED } from '../../src/worker/agent/approval/guard.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { type RefundWorker, refundScript, refundWorker, toolParts } from '../helpers/approvals.js';
import { userMessage } from '../helpers/messages.js';
import { sampleValue } from '../helpers/prom.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import type { Script } from '../helpers/scripted-model.js';

/**
 * Tool approval on real turns (docs/approvals.md): real Redis, the worker's own wiring
 * (`turnDepsFromConfig` with TOOL_APPROVAL), an `ai/test` model. A call that needs a person
 * ends its turn with the call waiting; the answer, stored once, makes the next turn run the
 * approved call (once) or record the denial, and the model goes on. Expiry and a new message
 * settle an open request too.
 */

const LABEL = 'apprturn';
const redis = testRedis();
const limits = { maxPending: 100, dedupWindowMs: 60_000 };

afterAll(async () => {
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

interface Chat extends RefundWorker {
  chatKey: string;
}

function chat(env: Record<string, string> = {}): Chat {
  return { ...refundWorker(redis, randomPrefix(LABEL), env), chatKey: 'c1' };
}

async function say(c: Chat, id: string, text: string) {
  await c.store.ingest(c.chatKey, userMessage(c.chatKey, id, text, { userId: 'u1' }), limits);
}

const events = async (c: Chat, type: string) =>
  (await c.store.readEvents(c.chatKey, undefined, 500)).filter((e) => e.type === type).map((e) => e.data);

describe('a tool call that needs approval', () => {
  it('ends its turn with the call waiting, and an approval makes the next turn run it once and go on', async () => {
    const c = chat();
    await say(c, 'm1', 'refund 42');
    const first = await runTurn(c.deps, c.chatKey);
    expect(first.status).toBe('done');
    expect(c.runs).toEqual([]);
    let history = await c.store.readHistory(c.chatKey);
    const [waiting] = toolParts(history, 'refund');
    expect(waiting).toMatchObject({ state: 'approval-requested', approval: { id: expect.any(String) } });
    const id = waiting!.approval!.id;
    const [requested] = await events(c, 'approval.requested');
    expect(requested).toMatchObject({ approvalId: id, tool: 'refund', input: { order: '42' } });
    const [open] = await listApprovals(c.store, c.chatKey);
    expect(open).toMatchObject({ state: 'open', request: { id, tool: 'refund', people: ['u1'] } });

    const answer = await answerApproval(
      c.store,
      c.chatKey,
      id,
      { approved: true, by: 'api' },
      { supersede: true },
    );
    expect(answer.status).toBe('accepted');
    const second = await runTurn(c.deps, c.chatKey);
    expect(second.status).toBe('done');
    expect(c.runs).toEqual(['42']);
    history = await c.store.readHistory(c.chatKey);
    expect(toolParts(history, 'refund')).toEqual([
      expect.objectContaining({
        state: 'output-available',
        output: { refunded: '42' },
        approval: expect.objectContaining({ id, approved: true }),
      }),
    ]);
    // The model went on from the result, in the message that asked.
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
    const sent = history[1]!.parts.find((p) => p.type === 'tool-chat_send') as { input: { text: string } };
    expect(sent.input.text).toBe('refund: {"type":"json","value":{"refunded":"42"}}');
    expect(await events(c, 'approval.resolved')).toEqual([
      expect.objectContaining({ approvalId: id, outcome: 'approved', by: 'api' }),
    ]);
    expect(await c.store.pendingCount(c.chatKey)).toBe(0);
    expect(
      sampleValue(await c.metrics.registry.metrics(), 'chatlane_tool_approvals_total', {
        tool: 'refund',
        outcome: 'approved',
      }),
    ).toBe(1);

    // A second answer changes nothing.
    const again = await answerApproval(
      c.store,
      c.chatKey,
      id,
      { approved: false, by: 'api' },
      { supersede: true },
    );
    expect(again.status).toBe('resolved');
    expect(await runTurn(c.deps, c.chatKey)).toMatchObject({ status: 'idle' });
    expect(c.runs).toEqual(['42']);
  });
});

/** Asks for a refund and runs the turn that makes the request: its id. */
async function requested(c: Chat, order = '42', id = 'm1'): Promise<string> {
  await say(c, id, `refund ${order}`);
  expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
  const waiting = toolParts(await c.store.readHistory(c.chatKey), 'refund').findLast(
    (p) => p.state === 'approval-requested',
  );
  return waiting!.approval!.id;
}

/** What the model was last told of a refund call (a tool message's result). */
function toldAboutRefund(c: Chat): unknown {
  const results = c.prompts.flatMap((prompt) =>
    prompt.flatMap((m) =>
      m.role === 'tool' ? m.content.filter((p) => p.type === 'tool-result' && p.toolName === 'refund') : [],
    ),
  );
  return results.at(-1);
}

describe('an approval request', () => {
  it('denied: the call never runs, the SDK records execution-denied for the model, and the model goes on', async () => {
    const c = chat();
    const id = await requested(c);
    expect(
      await answerApproval(
        c.store,
        c.chatKey,
        id,
        { approved: false, reason: 'not today', by: 'api' },
        { supersede: true },
      ),
    ).toMatchObject({ status: 'accepted' });
    expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
    expect(c.runs).toEqual([]);
    expect(toldAboutRefund(c)).toMatchObject({ output: { type: 'execution-denied', reason: 'not today' } });
    const history = await c.store.readHistory(c.chatKey);
    expect(toolParts(history, 'refund')).toEqual([
      expect.objectContaining({
        state: 'output-denied',
        approval: expect.objectContaining({ approved: false, reason: 'not today' }),
      }),
    ]);
    expect(await events(c, 'approval.resolved')).toEqual([
      expect.objectContaining({ approvalId: id, outcome: 'denied', reason: 'not today' }),
    ]);
  });

  it('expires after TOOL_APPROVAL_TTL_MS: an answer then is refused, and the turn that finds it denies it (expired) and goes on', async () => {
    const c = chat({ TOOL_APPROVAL_TTL_MS: '1000' });
    const id = await requested(c);
    const [open] = await listApprovals(c.store, c.chatKey);
    await new Promise((r) => setTimeout(r, Math.max(0, open!.request.expiresAt - Date.now()) + 50));
    expect(
      await answerApproval(c.store, c.chatKey, id, { approved: true, by: 'api' }, { supersede: true }),
    ).toEqual({
      status: 'expired',
      expiresAt: open!.request.expiresAt,
    });
    // The expiry's own turn: nothing pending, the request past its time.
    expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
    expect(c.runs).toEqual([]);
    expect(toldAboutRefund(c)).toMatchObject({ output: { type: 'execution-denied', reason: 'expired' } });
    expect(toolParts(await c.store.readHistory(c.chatKey), 'refund')).toEqual([
      expect.objectContaining({
        state: 'output-denied',
        approval: expect.objectContaining({ reason: 'expired' }),
      }),
    ]);
    expect(await events(c, 'approval.resolved')).toEqual([
      expect.objectContaining({ approvalId: id, outcome: 'expired' }),
    ]);
    // Settled: another expiry turn has nothing to do.
    expect(await runTurn(c.deps, c.chatKey)).toMatchObject({ status: 'idle' });
  });

  it('is superseded by a new message (TOOL_APPROVAL_ON_MESSAGE=supersede): the answer is refused, the request denied, the message answered', async () => {
    const c = chat();
    const id = await requested(c);
    await say(c, 'm2', 'never mind');
    expect(
      await answerApproval(c.store, c.chatKey, id, { approved: true, by: 'api' }, { supersede: true }),
    ).toEqual({
      status: 'superseded',
    });
    expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
    expect(c.runs).toEqual([]);
    const history = await c.store.readHistory(c.chatKey);
    expect(toolParts(history, 'refund')).toEqual([
      expect.objectContaining({
        state: 'output-denied',
        approval: expect.objectContaining({ reason: 'superseded' }),
      }),
    ]);
    const sent = history.at(-1)!.parts.find((p) => p.type === 'tool-chat_send') as {
      input: { text: string };
    };
    expect(sent.input.text).toBe('echo: never mind');
    // The model read the call as refused before the new message.
    expect(JSON.stringify(c.prompts.at(-1))).toContain('superseded');
    expect(await events(c, 'approval.resolved')).toEqual([
      expect.objectContaining({ approvalId: id, outcome: 'superseded', reason: 'superseded' }),
    ]);
    expect(
      await answerApproval(c.store, c.chatKey, id, { approved: true, by: 'api' }, { supersede: true }),
    ).toMatchObject({
      status: 'resolved',
      resolution: { outcome: 'superseded' },
    });
  });

  it('stays open across new messages with TOOL_APPROVAL_ON_MESSAGE=keep, and its approval still runs the call', async () => {
    const c = chat({ TOOL_APPROVAL_ON_MESSAGE: 'keep' });
    const id = await requested(c);
    await say(c, 'm2', 'meanwhile');
    expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
    expect((await listApprovals(c.store, c.chatKey))[0]?.state).toBe('open');
    expect(
      await answerApproval(c.store, c.chatKey, id, { approved: true, by: 'api' }, { supersede: false }),
    ).toMatchObject({
      status: 'accepted',
    });
    expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
    expect(c.runs).toEqual(['42']);
    const history = await c.store.readHistory(c.chatKey);
    // The call's part is final where it was asked; the model's going on is the newest message.
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'assistant']);
    expect(toolParts([history[1]!], 'refund')).toEqual([
      expect.objectContaining({ state: 'output-available', output: { refunded: '42' } }),
    ]);
    const sent = history.at(-1)!.parts.find((p) => p.type === 'tool-chat_send') as {
      input: { text: string };
    };
    expect(sent.input.text).toContain('refund: ');
  });

  it('approved once: a turn that finds the call started before (a worker died running it) never runs it again', async () => {
    const c = chat();
    const id = await requested(c);
    await answerApproval(c.store, c.chatKey, id, { approved: true, by: 'api' }, { supersede: true });
    // An earlier attempt began the call under its fence and died: its once record says `run`.
    const lease = await c.store.acquire(c.chatKey, 'dead-worker', 1);
    if (!lease.ok) throw new Error('busy');
    await beginOnce(
      c.store,
      c.chatKey,
      { fence: lease.fence, runId: 'dead', key: approvalOnceKey(id) },
      DEFAULT_ONCE_LIMITS,
    );
    await new Promise((r) => setTimeout(r, 10));
    expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
    expect(c.runs).toEqual([]);
    expect(toolParts(await c.store.readHistory(c.chatKey), 'refund')).toEqual([
      expect.objectContaining({ state: 'output-error', errorText: INTERRUPTED }),
    ]);
    expect(await events(c, 'approval.resolved')).toEqual([expect.objectContaining({ outcome: 'approved' })]);
  });

  it('approved and run by a turn that died before its commit: the next turn shows the stored outcome, not a second run', async () => {
    const c = chat();
    const id = await requested(c);
    await answerApproval(c.store, c.chatKey, id, { approved: true, by: 'api' }, { supersede: true });
    const lease = await c.store.acquire(c.chatKey, 'dead-worker', 1);
    if (!lease.ok) throw new Error('busy');
    const call = { fence: lease.fence, runId: 'dead', key: approvalOnceKey(id) };
    await beginOnce(c.store, c.chatKey, call, DEFAULT_ONCE_LIMITS);
    await endOnce(
      c.store,
      c.chatKey,
      { ...call, json: JSON.stringify({ ok: { refunded: '42' } }), refused: undefined },
      DEFAULT_ONCE_LIMITS,
    );
    await new Promise((r) => setTimeout(r, 10));
    expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
    expect(c.runs).toEqual([]);
    expect(toolParts(await c.store.readHistory(c.chatKey), 'refund')).toEqual([
      expect.objectContaining({ state: 'output-available', output: { refunded: '42' } }),
    ]);
  });
});

describe('a resumed turn that keeps failing', () => {
  /** The model fails whenever it reads the refund's outcome (after the approved call ran). */
  const failsAfterTheCall: Script = (prompt, call, options) => {
    const last = prompt.at(-1);
    if (
      last?.role === 'tool' &&
      last.content.some((p) => p.type === 'tool-result' && p.toolName === 'refund')
    )
      throw new Error('the model broke on the result');
    return refundScript(prompt, call, options);
  };

  it('retries, and on its last attempt settles the request from how far it got: the call ran once, the chat goes on', async () => {
    const c: Chat = { ...refundWorker(redis, randomPrefix(LABEL), {}, failsAfterTheCall), chatKey: 'c1' };
    const id = await requested(c);
    await answerApproval(c.store, c.chatKey, id, { approved: true, by: 'api' }, { supersede: true });
    await expect(runTurn(c.deps, c.chatKey)).rejects.toThrow('the model broke on the result');
    expect(c.runs).toEqual(['42']);
    expect((await listApprovals(c.store, c.chatKey))[0]?.state).toBe('answered');
    const last = await runTurn(c.deps, c.chatKey, { finalAttempt: true });
    expect(last).toMatchObject({ status: 'failed', code: 'TURN_FAILED' });
    // Never run again: its outcome comes from its once record.
    expect(c.runs).toEqual(['42']);
    expect(toolParts(await c.store.readHistory(c.chatKey), 'refund')).toEqual([
      expect.objectContaining({ state: 'output-available', output: { refunded: '42' } }),
    ]);
    expect(await c.store.pendingCount(c.chatKey)).toBe(0);
    expect(await events(c, 'approval.resolved')).toEqual([expect.objectContaining({ outcome: 'approved' })]);
    // The chat is not held: its next message is answered.
    await say(c, 'm2', 'still there?');
    expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
    const sent = (await c.store.readHistory(c.chatKey))
      .at(-1)!
      .parts.find((p) => p.type === 'tool-chat_send') as {
      input: { text: string };
    };
    expect(sent.input.text).toBe('echo: still there?');
  });
});

describe('a rule that answers at once', () => {
  it('deny: the call is refused in its own turn, the model reads execution-denied, nobody is asked', async () => {
    const c = chat({ TOOL_APPROVAL: 'refund=deny' });
    await say(c, 'm1', 'refund 42');
    expect((await runTurn(c.deps, c.chatKey)).status).toBe('done');
    expect(c.runs).toEqual([]);
    expect(toldAboutRefund(c)).toMatchObject({ output: { type: 'execution-denied' } });
    expect(toolParts(await c.store.readHistory(c.chatKey), 'refund')).toEqual([
      expect.objectContaining({
        state: 'output-denied',
        approval: expect.objectContaining({ isAutomatic: true }),
      }),
    ]);
    expect(await listApprovals(c.store, c.chatKey)).toEqual([]);
    expect(await events(c, 'approval.requested')).toEqual([]);
  });
});
