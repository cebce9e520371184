import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_METRICS_PORT } from '../../src/shared/config.js';
import {
  type CompactionJob,
  createQueue,
  enqueueCompaction,
  enqueueTurn,
  QUEUES,
  type TurnJob,
} from '../../src/shared/jobs.js';
import { userMessage } from '../helpers/messages.js';
import { startRole } from '../helpers/processes.js';
import { useStack } from '../helpers/stack.js';

/** Listen on `port` (0 = any); resolves undefined when it is taken. */
function hold(port: number): Promise<Server | undefined> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(port, '0.0.0.0', () => resolve(server));
  });
}

const portOf = (url: unknown) => Number(new URL(String(url)).port);

describe('several processes on one host with the default environment', () => {
  // METRICS_PORT '' = unset (an empty variable counts as unset), as on a fresh shell.
  const stack = useStack('e2e-startup', { roles: [], env: { METRICS_PORT: '' } });
  let taken: Server | undefined;

  beforeAll(async () => {
    // Make sure the default port is in use, whoever holds it, so every process below must
    // fall back; taking the default when it is free is covered in worker-side-server.test.ts.
    taken = await hold(DEFAULT_METRICS_PORT);
  });
  afterAll(async () => {
    await new Promise((r) => (taken ? taken.close(r) : r(undefined)));
  });

  it('two workers and a compactor all start, each on its own free side port, logged as metricsUrl', async () => {
    const procs = [await stack.start('worker'), await stack.start('worker'), await stack.start('compactor')];
    const started = procs.map((p) =>
      p.logs.find((l) => l.msg === 'worker started' || l.msg === 'compactor started'),
    );
    const ports = started.map((l) => portOf(l?.metricsUrl));
    expect(new Set(ports).size).toBe(3);
    for (const port of ports) expect(port).not.toBe(DEFAULT_METRICS_PORT);
    for (const [i, entry] of started.entries()) {
      expect(entry?.level, 'logged at info').toBe(30);
      const ready = await fetch(`${String(entry?.metricsUrl).replace('0.0.0.0', '127.0.0.1')}/readyz`);
      expect(ready.status, `process ${i} ready`).toBe(200);
    }
  });
});

describe('an explicit port that is taken', () => {
  const stack = useStack('e2e-startup-taken', { roles: [] });
  let blocker: Server;
  let port: number;

  beforeAll(async () => {
    blocker = (await hold(0))!;
    port = (blocker.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise((r) => blocker.close(r));
  });

  it('stops the worker with a message naming METRICS_PORT before it takes a job', async () => {
    const turns = createQueue<TurnJob>(stack.prefix, QUEUES.turns, stack.redis);
    try {
      await stack.store.ingest('taken-chat', userMessage('taken-chat', 't1', 'hello'), {
        maxPending: 10,
        dedupWindowMs: 60_000,
      });
      await enqueueTurn(turns, 'taken-chat');
      await expect(startRole('worker', { ...stack.env, METRICS_PORT: String(port) })).rejects.toThrow(
        new RegExp(`exited with 2 before it was ready: chatlane: METRICS_PORT: ${port} is already in use`),
      );
      const jobId = await turns.getDeduplicationJobId('taken-chat');
      expect(jobId && (await turns.getJobState(jobId))).toBe('waiting');
      expect(await stack.store.pendingCount('taken-chat')).toBe(1);
      expect(stack.mock.state.perChat['taken-chat']).toBeUndefined();
    } finally {
      await turns.close();
    }
  });

  it.each([
    ['METRICS_PORT', /METRICS_PORT: \d+ is already in use/],
    ['PORT', /PORT: \d+ is already in use/],
  ])('`all` with its %s taken stops before any of its roles takes a job', async (variable, message) => {
    const turns = createQueue<TurnJob>(stack.prefix, QUEUES.turns, stack.redis);
    const chat = `taken-all-${variable}`;
    try {
      await stack.store.ingest(chat, userMessage(chat, 'a1', 'hello'), {
        maxPending: 10,
        dedupWindowMs: 60_000,
      });
      await enqueueTurn(turns, chat);
      await expect(startRole('all', { ...stack.env, [variable]: String(port) })).rejects.toThrow(message);
      const jobId = await turns.getDeduplicationJobId(chat);
      expect(jobId && (await turns.getJobState(jobId))).toBe('waiting');
      expect(stack.mock.state.perChat[chat]).toBeUndefined();
    } finally {
      await turns.close();
    }
  });

  it('stops the compactor the same way, its queued compaction untouched', async () => {
    const compaction = createQueue<CompactionJob>(stack.prefix, QUEUES.compaction, stack.redis);
    try {
      await enqueueCompaction(compaction, 'taken-compaction');
      await expect(startRole('compactor', { ...stack.env, METRICS_PORT: String(port) })).rejects.toThrow(
        /exited with 2 before it was ready: chatlane: METRICS_PORT: \d+ is already in use/,
      );
      const jobId = await compaction.getDeduplicationJobId('taken-compaction');
      expect(jobId && (await compaction.getJobState(jobId))).toBe('waiting');
    } finally {
      await compaction.close();
    }
  });
});
