import { request } from 'node:http';
import type { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { userMessage } from '../helpers/messages.js';
import { type RoleProcess, startRole } from '../helpers/processes.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

function exitOf(proc: RoleProcess): Promise<Exit> {
  const { child } = proc;
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode, at: Date.now() });
  }
  return new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
}

const logged = (proc: RoleProcess, msg: string) =>
  waitFor(async () => proc.logs.some((l) => l.msg === msg), { timeoutMs: 5000, what: `log "${msg}"` });

describe('graceful shutdown', () => {
  const redis = testRedis();
  const prefix = randomPrefix('e2e-shutdown');
  const store = new ChatStore(redis, { prefix, maxEvents: 1000 });
  let turns: Queue<TurnJob>;
  let mock: Awaited<ReturnType<typeof startMockLlm>>;
  const procs: RoleProcess[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    mock = await startMockLlm({ port: 0, latencyMs: [1, 5] });
    turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
    // Short locks and stall checks everywhere: BullMQ throttles stall checks queue-wide by
    // the interval of whichever worker checked last.
    env = {
      CHATLANE_PREFIX: prefix,
      LLM_BASE_URL: mock.url,
      LLM_MODEL: 'mock',
      TURN_LEASE_MS: '1500',
      JOB_LOCK_MS: '1500',
      STALLED_INTERVAL_MS: '1000',
    };
  });

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill('SIGKILL')));
    await mock?.close();
    await turns?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  /** What the ingress does for a 202: store, then enqueue. */
  async function accept(chatKey: string, text: string): Promise<void> {
    await store.ingest(chatKey, userMessage(chatKey, `${chatKey}-${text}`, text), {
      maxPending: 100,
      dedupWindowMs: 60_000,
    });
    await enqueueTurn(turns, chatKey);
    await store.touchChat(chatKey);
  }

  async function start(role: 'worker' | 'ingress', extra: Record<string, string> = {}) {
    const proc = await startRole(role, { ...env, ...extra });
    procs.push(proc);
    return proc;
  }

  const roles = async (chatKey: string) => (await store.readHistory(chatKey)).map((m) => m.role);

  it('SIGTERM mid-turn: the worker stops fetching, waits for the turn, commits it and exits 0', async () => {
    mock.state.hold('sd-wait');
    const worker = await start('worker', { SHUTDOWN_GRACE_MS: '20000' });
    await accept('sd-wait', 'hello');
    await mock.state.waitForRequest('sd-wait', 1);

    const exited = exitOf(worker);
    worker.child.kill('SIGTERM');
    await logged(worker, 'shutting down');
    // A job that arrives now is left for other workers.
    await accept('sd-late', 'too late');
    await sleep(800);
    expect(worker.child.exitCode).toBeNull();
    expect(await roles('sd-wait')).toEqual([]);
    expect(mock.state.perChat['sd-late']).toBeUndefined();

    mock.state.release('sd-wait');
    const exit = await exited;
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(await roles('sd-wait')).toEqual(['user', 'assistant']);
    expect(await store.pendingCount('sd-wait')).toBe(0);
    expect(worker.logs.some((l) => String(l.msg).startsWith('shutdown grace ran out'))).toBe(false);
    // The late chat's job is still there for the next worker.
    const lateJob = await turns.getDeduplicationJobId('sd-late');
    expect(lateJob && (await turns.getJobState(lateJob))).toBe('waiting');
    expect(await store.pendingCount('sd-late')).toBe(1);
  }, 60_000);

  it('a second SIGTERM exits at once, non-zero', async () => {
    mock.state.hold('sd-twice');
    const worker = await start('worker', { SHUTDOWN_GRACE_MS: '20000' });
    await accept('sd-twice', 'hello');
    await mock.state.waitForRequest('sd-twice', 1);

    const exited = exitOf(worker);
    worker.child.kill('SIGTERM');
    await logged(worker, 'shutting down');
    await sleep(200);
    expect(worker.child.exitCode).toBeNull();
    const second = Date.now();
    worker.child.kill('SIGTERM');
    const exit = await exited;
    expect(exit.code).toBe(1);
    // Far below the 20 s grace: the second signal did not wait for the turn (a loaded
    // machine can take a couple of seconds to deliver the signal and tear down).
    expect(exit.at - second).toBeLessThan(8000);
    expect(worker.logs.some((l) => l.msg === 'second signal: exiting now')).toBe(true);
    // Nothing was committed by the interrupted turn; the message waits for another worker.
    expect(await roles('sd-twice')).toEqual([]);
    expect(await store.pendingCount('sd-twice')).toBe(1);
    mock.state.release('sd-twice');
  }, 60_000);

  it('grace ran out: the worker stops its turn, releases the chat and exits; another worker answers once under a new fence', async () => {
    // Long leases and locks: recovery must come from the stopped turn releasing its lease
    // and failing its attempt, not from waiting for them to expire.
    const short = { SHUTDOWN_GRACE_MS: '1000', TURN_LEASE_MS: '60000', JOB_LOCK_MS: '60000' };
    mock.state.hold('sd-cut');
    const first = await start('worker', short);
    await accept('sd-cut', 'hello');
    await mock.state.waitForRequest('sd-cut', 1);
    const fenceBefore = (await store.readMeta('sd-cut')).fence;

    const exited = exitOf(first);
    const sent = Date.now();
    first.child.kill('SIGTERM');
    const exit = await exited;
    expect(exit.code).toBe(0);
    expect(exit.at - sent).toBeGreaterThanOrEqual(1000);
    expect(exit.at - sent).toBeLessThan(6000);
    expect(first.logs.some((l) => String(l.msg).startsWith('shutdown grace ran out'))).toBe(true);
    expect(await roles('sd-cut')).toEqual([]);

    const restarted = Date.now();
    await start('worker', short);
    // The stopped attempt failed with a 1 s backoff and the lease is free: no 60 s wait.
    await mock.state.waitForRequest('sd-cut', 2);
    expect(Date.now() - restarted).toBeLessThan(15_000);
    mock.state.release('sd-cut');
    await waitFor(async () => (await store.pendingCount('sd-cut')) === 0, {
      timeoutMs: 30_000,
      what: 'the cut-off turn to be finished by another worker',
    });
    const history = await store.readHistory('sd-cut');
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
    const meta = await store.readMeta('sd-cut');
    expect(Number(meta.fence)).toBeGreaterThan(Number(fenceBefore));
    const events = await store.readEvents('sd-cut', undefined, 100);
    expect(events.map((e) => e.type)).toContain('turn.aborted');
    expect(events.map((e) => e.type)).not.toContain('lease.takeover');
    expect(events.filter((e) => e.type === 'turn.committed')).toHaveLength(1);
    expect(mock.state.violations).toEqual([]);
  }, 60_000);

  it('SIGTERM to the ingress: an in-flight request completes, new ones are refused, exit 0, nothing lost', async () => {
    const ingress = await start('ingress');
    const url = new URL(ingress.url!);
    const body = JSON.stringify({ id: 'inflight-1', text: 'sent while the ingress stops' });
    const half = Math.floor(body.length / 2);

    // Headers and half the body now, the rest after SIGTERM.
    let req!: ReturnType<typeof request>;
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req = request(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/v1/chats/sd-ingress/messages',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.on('data', (d: Buffer) => {
            text += d.toString();
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
    });
    req.write(body.slice(0, half));
    await sleep(300);

    const exited = exitOf(ingress);
    ingress.child.kill('SIGTERM');
    await logged(ingress, 'shutting down');
    const refused = await fetch(`${ingress.url}/v1/chats/sd-ingress/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'after-1', text: 'too late' }),
    }).then(
      (res) => res.status,
      () => 'connection refused',
    );
    expect([503, 'connection refused']).toContain(refused);
    expect(ingress.child.exitCode).toBeNull();

    req.end(body.slice(half));
    const res = await response;
    const answeredAt = Date.now();
    expect(res.status).toBe(202);
    expect(JSON.parse(res.body)).toMatchObject({ status: 'accepted', messageId: 'inflight-1' });
    const exit = await exited;
    expect(exit.code).toBe(0);
    // The client's keep-alive connection (Node's agent keeps it 5 s) does not hold the exit.
    expect(exit.at - answeredAt).toBeLessThan(2000);

    // Stored once and either waiting with a job or already answered by a running worker. One
    // MULTI reads both: two reads could straddle the worker's commit and see it in both.
    const input = await store.readTurnInput('sd-ingress', 1000, 1000);
    const pending = input.pending.map((e) => e.message.id);
    const answered = input.window.messages.filter((m) => m.role === 'user').map((m) => m.id);
    expect([...answered, ...pending]).toEqual(['inflight-1']);
    if (pending.length > 0) {
      // Waiting with a job, or taken by the earlier test's worker (still running) since the
      // read above: then its job is gone and the message is being answered.
      const answeredNow = async () =>
        (await store.readTurnInput('sd-ingress', 1000, 1000)).window.messages.some(
          (m) => m.id === 'inflight-1',
        );
      expect((await turns.getDeduplicationJobId('sd-ingress')) || (await answeredNow())).toBeTruthy();
    }
  }, 60_000);
});
