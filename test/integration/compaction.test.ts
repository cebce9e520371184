import { Queue } from 'bullmq';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { enqueueCompaction, QUEUES, queueOptions } from '../../src/shared/jobs.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { createMetrics } from '../../src/shared/metrics.js';
import { applyCompaction, readArchive, readSnapshot } from '../../src/shared/store/archive.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { searchHistory } from '../../src/worker/agent/tools/history-search.js';
import { type CompactionDeps, compactChat } from '../../src/worker/compaction/compact.js';
import { createCompactionWorker } from '../../src/worker/compaction/compactor.js';
import { assistantMessage, counted, textOf, userMessage } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { type Script, scriptedModel } from '../helpers/scripted-model.js';

const redis = testRedis();
let prefix: string;
let store: ChatStore;

beforeEach(() => {
  prefix = randomPrefix('compact');
  store = new ChatStore(redis, { prefix, maxEvents: 500 });
});
afterAll(async () => {
  await deleteLabel(redis, 'compact');
  redis.disconnect();
});

/** Commit messages the way a turn does (fenced, with token counts). */
async function commitMessages(chatKey: string, messages: ChatMessage[]): Promise<void> {
  const lease = await store.acquire(chatKey, 'seeder', 5000);
  if (!lease.ok) throw new Error('busy');
  const res = await store.commit(chatKey, lease.fence, {
    runId: 'seed',
    consumed: [],
    messages: messages.map(counted),
  });
  if (!res.ok) throw new Error(`seed commit failed: ${res.reason}`);
  await store.finish(chatKey, lease.fence, 'seeder', 'seed');
}

function conversation(chatKey: string, from: number, count: number): ChatMessage[] {
  return Array.from({ length: count }, (_, i) =>
    (from + i) % 2 === 0
      ? userMessage(chatKey, `m${from + i}`, `user message number ${from + i} about topic-${from + i}`)
      : assistantMessage(chatKey, `m${from + i}`, `assistant reply number ${from + i}`),
  );
}

function deps(script: Script, settings: Partial<CompactionDeps['settings']> = {}) {
  const scripted = scriptedModel(script);
  const d: CompactionDeps = {
    store,
    model: scripted.model,
    modelName: 'scripted',
    logger: silentLogger(),
    settings: {
      keepLast: 4,
      keepRecentTokens: 0,
      maxOutputTokens: 500,
      archive: true,
      maxEvents: 500,
      maxCharsPerMessage: 4000,
      ...settings,
    },
  };
  return { deps: d, ...scripted };
}

const promptText = (prompt: { role: string; content: unknown }[]) =>
  prompt.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content))).join('\n');

describe('compactChat', () => {
  it('replaces the head with one summary message, archives the originals with the same sourceRange, and keeps token totals right', async () => {
    await commitMessages('c1', conversation('c1', 0, 10));
    const before = Number((await store.readMeta('c1')).tokens);
    const { deps: d } = deps(() => ({ text: '## Goals and requests\n- things' }));
    const res = await compactChat(d, 'c1');
    expect(res).toMatchObject({ status: 'applied', replaced: 6 });

    const history = await store.readHistory('c1');
    expect(history.map((m) => m.id).slice(1)).toEqual(['m6', 'm7', 'm8', 'm9']);
    const summary = history[0]!;
    expect(summary).toMatchObject({
      role: 'assistant',
      metadata: { kind: 'summary', sourceRange: { fromId: 'm0', toId: 'm5', count: 6 } },
    });
    expect(summary.metadata.tokens).toBeGreaterThan(0);

    const [archived] = await readArchive(store, 'c1', undefined, 10);
    expect(archived?.entry.sourceRange).toEqual(summary.metadata.sourceRange);
    expect(archived?.entry.messages.map((m) => m.id)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);

    const sum = history.reduce((n, m) => n + (m.metadata.tokens ?? 0), 0);
    expect(Number((await store.readMeta('c1')).tokens)).toBe(sum);
    expect(sum).toBeLessThan(before);
    const types = (await store.readEvents('c1', undefined, 100)).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['compaction.started', 'compaction.applied']));
  });

  it('a second compaction sends the previous summary plus only the new messages', async () => {
    await commitMessages('c1', conversation('c1', 0, 10));
    const { deps: d, prompts } = deps((_p, call) => ({
      text: call === 0 ? 'FIRST SUMMARY' : 'SECOND SUMMARY',
    }));
    await compactChat(d, 'c1');
    await commitMessages('c1', conversation('c1', 10, 6));
    await compactChat(d, 'c1');

    const second = promptText(prompts[1]! as never);
    expect(second).toContain('FIRST SUMMARY');
    const mentions = (n: number) => new RegExp(`number ${n}(?!\\d)`).test(second);
    for (const n of [6, 7, 8, 9, 10, 11]) expect(mentions(n), `m${n}`).toBe(true);
    for (const n of [0, 1, 5]) expect(mentions(n), `m${n}`).toBe(false);
    const history = await store.readHistory('c1');
    expect(history[0]).toMatchObject({
      metadata: { kind: 'summary', sourceRange: { fromId: 'm6', toId: 'm11' } },
    });
    expect(history[0]!.metadata.previousSummaryId).toMatch(/^summary-/);
    expect(textOf(history[0]!)).toBe('SECOND SUMMARY');
  });

  it('messages appended while the summary is being written survive', async () => {
    await commitMessages('c1', conversation('c1', 0, 10));
    const { deps: d } = deps(async () => {
      await commitMessages('c1', conversation('c1', 10, 3));
      return { text: 'summary' };
    });
    expect((await compactChat(d, 'c1')).status).toBe('applied');
    expect((await store.readHistory('c1')).map((m) => m.id).slice(1)).toEqual([
      'm6',
      'm7',
      'm8',
      'm9',
      'm10',
      'm11',
      'm12',
    ]);
  });

  it('of two concurrent compactions of one chat, the second is discarded by its compare-and-swap', async () => {
    await commitMessages('c1', conversation('c1', 0, 10));
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const slow = deps(async () => {
      await gate;
      return { text: 'slow summary' };
    });
    // A different cut, so the slow result is stale rather than a repeat of the same range.
    const fast = deps(() => ({ text: 'fast summary' }), { keepLast: 2 });
    const slowRun = compactChat(slow.deps, 'c1');
    await waitFor(async () => slow.calls() === 1, { what: 'slow compaction to reach the model' });
    expect((await compactChat(fast.deps, 'c1')).status).toBe('applied');
    release();
    expect(await slowRun).toMatchObject({ status: 'stale' });
    const history = await store.readHistory('c1');
    expect(history.filter((m) => m.metadata.kind === 'summary').map(textOf)).toEqual(['fast summary']);
    expect((await readArchive(store, 'c1', undefined, 10)).length).toBe(1);
    const events = await store.readEvents('c1', undefined, 100);
    expect(events.filter((e) => e.type === 'compaction.discarded').map((e) => e.data.reason)).toEqual([
      'version',
    ]);
  });

  it('running the same compaction twice changes nothing the second time', async () => {
    await commitMessages('c1', conversation('c1', 0, 10));
    const { deps: d } = deps(() => ({ text: 'summary' }));
    await compactChat(d, 'c1');
    const after = await readSnapshot(store, 'c1');
    expect(await compactChat(d, 'c1')).toEqual({ status: 'nothing-to-cut' });
    expect(await readSnapshot(store, 'c1')).toEqual(after);
  });

  it('applying an already applied range is a no-op (idempotent on sourceRange.toId)', async () => {
    await commitMessages('c1', conversation('c1', 0, 6));
    const snap = await readSnapshot(store, 'c1');
    const summary = counted(
      assistantMessage('c1', 'sum1', 'S', {
        kind: 'summary',
        sourceRange: { fromId: 'm0', toId: 'm2', count: 3 },
      }),
    );
    const apply = {
      expectedVersion: snap.version,
      replaced: snap.history.slice(0, 3),
      summary,
      archive: undefined,
      maxEvents: 100,
      eventData: {},
    };
    expect((await applyCompaction(store, 'c1', apply)).status).toBe('ok');
    const once = await store.readHistory('c1');
    expect(await applyCompaction(store, 'c1', apply)).toEqual({ status: 'noop' });
    expect(await store.readHistory('c1')).toEqual(once);
  });

  it('a failed summary call changes nothing, and the job is retried until it succeeds', async () => {
    await commitMessages('c1', conversation('c1', 0, 10));
    const before = await readSnapshot(store, 'c1');
    const { deps: d } = deps((_p, call) => {
      if (call === 0) throw new Error('provider down');
      return { text: 'summary after retry' };
    });
    await expect(compactChat(d, 'c1')).rejects.toThrow('provider down');
    expect(await readSnapshot(store, 'c1')).toEqual(before);

    // Through the real queue: attempt 1 fails, the retry applies.
    const flaky = deps((_p, call) => {
      if (call === 0) throw new Error('provider down');
      return { text: 'summary after retry' };
    });
    const queue = new Queue(QUEUES.compaction, queueOptions(prefix, QUEUES.compaction, redis));
    const metrics = createMetrics({ defaultMetrics: false });
    const worker = createCompactionWorker(flaky.deps, {
      prefix,
      connection: redis,
      concurrency: 1,
      lockDurationMs: 5000,
      stalledIntervalMs: 5000,
      metrics,
    });
    worker.run();
    try {
      await queue.add(
        'compaction',
        { chatKey: 'c1' },
        { attempts: 3, backoff: { type: 'fixed', delay: 50 } },
      );
      await waitFor(async () => (await store.readHistory('c1'))[0]?.metadata.kind === 'summary', {
        what: 'retried compaction',
      });
      expect(textOf((await store.readHistory('c1'))[0]!)).toBe('summary after retry');
      expect(flaky.calls()).toBe(2);
      const runs = await metrics.registry.getSingleMetricAsString('chatlane_compaction_runs_total');
      expect(runs).toMatch(/result="failed"\} 1/);
      await waitFor(
        async () =>
          /result="applied"\} 1/.test(
            await metrics.registry.getSingleMetricAsString('chatlane_compaction_runs_total'),
          ),
        { what: 'applied run counted' },
      );
    } finally {
      await worker.close();
      await queue.close();
    }
  });

  it('enqueueCompaction deduplicates by chat while a job waits', async () => {
    const queue = new Queue(QUEUES.compaction, queueOptions(prefix, QUEUES.compaction, redis));
    try {
      await enqueueCompaction(queue, 'c1');
      await enqueueCompaction(queue, 'c1');
      await enqueueCompaction(queue, 'c2');
      expect((await queue.getJobs(['waiting'])).map((j) => j.data.chatKey).sort()).toEqual(['c1', 'c2']);
    } finally {
      await queue.close();
    }
  });
});

describe('chat_history_search', () => {
  it('finds an archived message by a word that is no longer in the working history', async () => {
    await commitMessages('c1', [
      userMessage('c1', 'u0', 'My passport number is XK-4471, remember it'),
      ...conversation('c1', 1, 9),
    ]);
    const { deps: d } = deps(() => ({ text: 'summary without the number' }));
    await compactChat(d, 'c1');
    const working = (await store.readHistory('c1')).map(textOf).join(' ');
    expect(working).not.toContain('passport');

    const hits = await searchHistory(store, 'c1', 'Passport', 5);
    expect(hits[0]).toMatchObject({ messageId: 'u0', role: 'user' });
    expect(hits[0]!.text).toContain('XK-4471');
    expect(await searchHistory(store, 'c2', 'passport', 5)).toEqual([]);
  });

  it('ranks messages matching more terms first and bounds the results', async () => {
    await commitMessages('c1', [
      userMessage('c1', 'a', 'red apples'),
      userMessage('c1', 'b', 'red apples and green pears'),
      userMessage('c1', 'c', 'green'),
      ...conversation('c1', 3, 8),
    ]);
    await compactChat(deps(() => ({ text: 's' })).deps, 'c1');
    const hits = await searchHistory(store, 'c1', 'green pears', 2);
    expect(hits.map((h) => h.messageId)).toEqual(['b', 'c']);
  });
});
