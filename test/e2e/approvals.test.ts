import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import { listApprovals } from '../../src/shared/store/approvals.js';
import { approvalOnceKey, INTERRUPTED } from '../../src/worker/agent/approval/guard.js';
import { postMessage, type RoleProcess } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { haveSandbox } from '../helpers/sandbox.js';
import { useStack } from '../helpers/stack.js';

/**
 * Tool approval end to end (docs/approvals.md): a real ingress and two worker processes,
 * EXEC_SHELL=approve (every command waits for a person), the mock model (a message
 * `$ <command>` makes it call exec_shell, then chat_send the result). Answers come over HTTP.
 * No worker waits for a person; the lane carries the answer to whichever worker is free, a
 * crash loses neither request nor answer, and an approved command never runs twice.
 */

/** Short leases and locks: a takeover within seconds, not the default ~11 s. */
const FAST_RECOVERY = { TURN_LEASE_MS: '1500', JOB_LOCK_MS: '1500', STALLED_INTERVAL_MS: '500' };

describe.skipIf(!haveSandbox)('tool approval across real processes', () => {
  const stack = useStack('e2e-appr', {
    roles: ['ingress'],
    env: { EXEC_SHELL: 'approve', EXEC_SHELL_TIMEOUT_MS: '20000', ...FAST_RECOVERY },
  });
  const { store, redis } = stack;
  const workers: RoleProcess[] = [];

  /** Two workers (started on first use, replaced when a test killed one). */
  async function twoWorkers(): Promise<RoleProcess[]> {
    for (let i = workers.length - 1; i >= 0; i--)
      if (workers[i]!.child.exitCode !== null || workers[i]!.child.signalCode) workers.splice(i, 1);
    while (workers.length < 2) workers.push(await stack.start('worker'));
    return workers;
  }

  const replies = async (chatKey: string) =>
    (await store.readOutbox(chatKey, undefined, 50)).filter((o) => !o.approval).map((o) => o.text);

  /** A command from the chat's person; resolves with the approval it waits for. */
  async function command(chatKey: string, id: string, cmd: string): Promise<string> {
    const before = (await listApprovals(store, chatKey)).length;
    await postMessage(stack.ingressUrl(), chatKey, id, `$ ${cmd}`);
    const record = await waitFor(
      async () => {
        const all = await listApprovals(store, chatKey);
        return all.length > before ? all.at(-1) : undefined;
      },
      { timeoutMs: 30_000, what: `the approval request for ${cmd}` },
    );
    expect(record.request).toMatchObject({ tool: 'exec_shell', input: { command: cmd } });
    return record.request.id;
  }

  async function answer(chatKey: string, id: string, body: Record<string, unknown>) {
    return fetch(`${stack.ingressUrl()}/v1/chats/${chatKey}/approvals/${id}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  /** The chat's `n`th reply (1-based), once there. */
  const reply = (chatKey: string, n: number) =>
    waitFor(async () => (await replies(chatKey))[n - 1], {
      timeoutMs: 45_000,
      what: `reply ${n} of ${chatKey}`,
    });

  const shellOut = (text: string) =>
    JSON.parse(text.slice('shell: '.length)) as { stdout: string; exitCode: number };

  /** The chat's approval.resolved events, once there is one (a reply is sent before its turn commits). */
  const resolved = (chatKey: string) =>
    waitFor(
      async () => {
        const events = await store.readEvents(chatKey, undefined, 500);
        const data = events.filter((e) => e.type === 'approval.resolved').map((e) => e.data);
        return data.length > 0 ? data : undefined;
      },
      { timeoutMs: 30_000, what: `approval.resolved in ${chatKey}` },
    );

  /** The worker process whose turn was the chat's `n`th to commit. */
  async function workerOfTurn(chatKey: string, n: number): Promise<RoleProcess> {
    const committed = await waitFor(
      async () => {
        const events = await store.readEvents(chatKey, undefined, 500);
        const turns = events.filter((e) => e.type === 'turn.committed');
        return turns.length >= n ? turns[n - 1] : undefined;
      },
      { timeoutMs: 30_000, what: `turn ${n} of ${chatKey} committed` },
    );
    const worker = String(committed.data.worker);
    return workers.find((w) => worker.endsWith(`:${w.pid}`))!;
  }

  it('an approved command runs, on whichever worker, and the workspace it leaves is there for the next one on the other worker', async () => {
    await twoWorkers();
    const chat = 'appr-ok';
    const id = await command(chat, 'm1', 'echo one > note.txt && ls');
    // The request is in the live record: the event and an outbox card, nothing ran.
    const outbox = await store.readOutbox(chat, undefined, 10);
    expect(outbox.map((o) => o.approval?.id)).toEqual([id]);
    expect(outbox[0]!.text).toContain('$ echo one > note.txt && ls');
    const res = await answer(chat, id, { approved: true });
    expect(res.status).toBe(202);
    expect(shellOut(await reply(chat, 1))).toMatchObject({ exitCode: 0, stdout: 'note.txt\n' });
    expect(await resolved(chat)).toEqual([
      expect.objectContaining({ approvalId: id, outcome: 'approved', by: 'api' }),
    ]);
    // A second answer changes nothing.
    const again = await answer(chat, id, { approved: false });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe('APPROVAL_RESOLVED');

    // The worker that ran it goes; the next command runs on the other and finds the file.
    // Turn 1 made the request, turn 2 ran the command.
    const first = await workerOfTurn(chat, 2);
    await first.kill('SIGTERM');
    const id2 = await command(chat, 'm2', 'cat note.txt');
    expect((await answer(chat, id2, { approved: true })).status).toBe(202);
    expect(shellOut(await reply(chat, 2)).stdout).toBe('one\n');
    expect((await workerOfTurn(chat, 4)).pid).not.toBe(first.pid);
  }, 120_000);

  it('a denied command never runs; the model is told, and says so', async () => {
    await twoWorkers();
    const chat = 'appr-deny';
    const id = await command(chat, 'm1', 'touch denied.txt');
    expect((await answer(chat, id, { approved: false, reason: 'not on my machine' })).status).toBe(202);
    expect(await reply(chat, 1)).toBe('shell: not on my machine');
    expect(await resolved(chat)).toEqual([
      expect.objectContaining({ outcome: 'denied', reason: 'not on my machine' }),
    ]);
    const id2 = await command(chat, 'm2', 'ls');
    expect((await answer(chat, id2, { approved: true })).status).toBe(202);
    expect(shellOut(await reply(chat, 2)).stdout).toBe('');
  }, 120_000);

  it('a new message supersedes the open request: the answer then gets 409, the message is answered', async () => {
    await twoWorkers();
    const chat = 'appr-super';
    const id = await command(chat, 'm1', 'echo never');
    await postMessage(stack.ingressUrl(), chat, 'm2', 'forget it');
    const late = await answer(chat, id, { approved: true });
    expect(late.status).toBe(409);
    expect(await reply(chat, 1)).toBe('echo: forget it');
    expect(await resolved(chat)).toEqual([
      expect.objectContaining({ approvalId: id, outcome: 'superseded' }),
    ]);
    const history: ChatMessage[] = await store.readHistory(chat);
    expect(history.flatMap((m) => m.parts).find((p) => p.type === 'tool-exec_shell')).toMatchObject({
      state: 'output-denied',
      approval: { reason: 'superseded' },
    });
  }, 120_000);

  it('an unanswered request expires after TOOL_APPROVAL_TTL_MS: denied (expired) by its own turn, and the model goes on', async () => {
    // Requests made by this worker expire in 2 s; no other worker runs meanwhile.
    for (const w of workers.splice(0)) await w.kill('SIGTERM');
    const quick = await stack.start('worker', { TOOL_APPROVAL_TTL_MS: '2000' });
    workers.push(quick);
    const chat = 'appr-expire';
    const id = await command(chat, 'm1', 'echo too late');
    expect(await reply(chat, 1)).toBe('shell: expired');
    expect(await resolved(chat)).toEqual([expect.objectContaining({ approvalId: id, outcome: 'expired' })]);
    expect((await answer(chat, id, { approved: true })).status).toBe(409);
    await quick.kill('SIGTERM');
    workers.splice(0);
  }, 120_000);

  it('workers frozen when the answer comes and one of them killed: the answer is not lost and the command runs once', async () => {
    const [a, b] = await twoWorkers();
    const chat = 'appr-frozen';
    const id = await command(chat, 'm1', 'echo ran >> runs.txt; cat runs.txt');
    a!.child.kill('SIGSTOP');
    b!.child.kill('SIGSTOP');
    try {
      expect((await answer(chat, id, { approved: true })).status).toBe(202);
      // A frozen worker may already have taken the turn's job from Redis: it dies holding it.
      await new Promise((r) => setTimeout(r, 500));
      await a!.kill('SIGKILL');
    } finally {
      b!.child.kill('SIGCONT');
    }
    expect(shellOut(await reply(chat, 1)).stdout).toBe('ran\n');
    const once = JSON.parse((await redis.hget(store.keys(chat).once, approvalOnceKey(id)))!);
    expect(once).toMatchObject({ s: 'done', n: 1 });
  }, 120_000);

  it('the worker killed while the approved command runs: the takeover never runs it again, and says it was interrupted', async () => {
    await twoWorkers();
    const chat = 'appr-kill';
    const id = await command(chat, 'm1', 'sleep 6; echo finished');
    expect((await answer(chat, id, { approved: true })).status).toBe(202);
    // The guard records the run before the command starts: that is the moment to kill.
    const key = approvalOnceKey(id);
    await waitFor(async () => (await redis.hget(store.keys(chat).once, key)) !== null, {
      timeoutMs: 30_000,
      intervalMs: 20,
      what: 'the approved command to start',
    });
    const owner = String((await store.readMeta(chat)).owner ?? '');
    const running = workers.find((w) => owner.includes(`:${w.pid}:`))!;
    expect(running).toBeDefined();
    await running.kill('SIGKILL');
    expect(await reply(chat, 1)).toContain(INTERRUPTED);
    // Its one start stands: no second attempt was begun.
    const once = JSON.parse((await redis.hget(store.keys(chat).once, key))!);
    expect(once).toMatchObject({ s: 'run', n: 1 });
    const events = await store.readEvents(chat, undefined, 500);
    expect(events.some((e) => e.type === 'lease.takeover')).toBe(true);
    expect(await resolved(chat)).toEqual([expect.objectContaining({ approvalId: id, outcome: 'approved' })]);
  }, 120_000);

  it('the worker killed after the approved command ran, before its commit: the takeover shows its output, never a second run', async () => {
    await twoWorkers();
    const chat = 'appr-late-kill';
    const id = await command(chat, 'm1', 'echo ran >> runs.txt; cat runs.txt');
    // The model call after the command is slow: the kill lands between the command and the commit.
    stack.mock.state.setChatLatency(chat, 4000);
    const calls = stack.mock.state.recorded(chat).length;
    expect((await answer(chat, id, { approved: true })).status).toBe(202);
    await stack.mock.state.waitForRequest(chat, calls + 1);
    const owner = String((await store.readMeta(chat)).owner ?? '');
    await workers.find((w) => owner.includes(`:${w.pid}:`))!.kill('SIGKILL');
    stack.mock.state.setChatLatency(chat, undefined);
    expect(shellOut(await reply(chat, 1)).stdout).toBe('ran\n');
    // Run again, the file would hold two lines.
    const id2 = await command(chat, 'm2', 'cat runs.txt');
    expect((await answer(chat, id2, { approved: true })).status).toBe(202);
    expect(shellOut(await reply(chat, 2)).stdout).toBe('ran\n');
    expect(stack.mock.state.violations).toEqual([]);
  }, 120_000);
});
