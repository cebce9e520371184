import { describe, expect, it } from 'vitest';
import { createQueue, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { postMessage } from '../helpers/processes.js';
import { parseSamples, type Sample } from '../helpers/prom.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

/** Families that describe a queue, not a process: one exporter per fleet. */
const QUEUE_WIDE = ['bullmq_job_count', 'bullmq_job_completed_total', 'bullmq_job_failed_total'];

const sum = (scrapes: Sample[][], name: string, labels: Record<string, string> = {}) =>
  scrapes
    .flat()
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((total, s) => total + s.value, 0);

describe('metrics a fleet can sum', () => {
  // The default environment: an ingress, two workers and a compactor, each scraped.
  const stack = useStack('e2e-fleet-metrics', { roles: ['ingress', 'worker', 'worker', 'compactor'] });

  const endpoints = () =>
    stack.procs.map((p) => {
      const started = p.logs.find((l) => l.msg === 'worker started' || l.msg === 'compactor started');
      return String(started?.metricsUrl ?? p.url);
    });
  const scrapeAll = async () =>
    Promise.all(endpoints().map(async (url) => parseSamples(await (await fetch(`${url}/metrics`)).text())));

  it('summed over every process, each counter counts the fleet once', async () => {
    const chats = Array.from({ length: 8 }, (_, i) => `fleet-${i}`);
    for (const c of chats) {
      await postMessage(stack.ingressUrl(), c, `${c}-1`, 'hello');
      await postMessage(stack.ingressUrl(), c, `${c}-2`, 'again');
    }
    const committed = async () => {
      let n = 0;
      for (const c of chats) {
        n += (await stack.store.readEvents(c, undefined, 100)).filter(
          (e) => e.type === 'turn.committed',
        ).length;
      }
      return n;
    };
    await waitFor(async () => {
      for (const c of chats) if ((await stack.store.pendingCount(c)) > 0) return false;
      return true;
    });
    const turnsCommitted = await committed();

    // Each turn is counted by the one worker that ran it (observed as its job ends).
    const scrapes = await waitFor(async () => {
      const s = await scrapeAll();
      return sum(s, 'chatlane_turn_duration_seconds_count', { outcome: 'done' }) === turnsCommitted && s;
    });
    expect(turnsCommitted).toBeGreaterThanOrEqual(chats.length);
    expect(sum(scrapes, 'chatlane_messages_total', { result: 'accepted' })).toBe(chats.length * 2);
    // Every model request the mock saw was metered by exactly one process.
    expect(sum(scrapes, 'chatlane_model_call_duration_seconds_count')).toBe(stack.mock.state.requests);

    // Queue-wide families come from the ingress only, so their sum is the queue's own count.
    const [ingress, ...others] = scrapes;
    for (const family of QUEUE_WIDE) {
      expect(
        ingress!.some((s) => s.name === family),
        family,
      ).toBe(true);
      for (const other of others)
        expect(
          other.some((s) => s.name === family),
          family,
        ).toBe(false);
    }
    const turns = createQueue<TurnJob>(stack.prefix, QUEUES.turns, stack.redis);
    try {
      // BullMQ's completed count lives in Redis; the fleet's sum must equal it, not a multiple.
      const { completed, summed } = await waitFor(async () => {
        const count = (await turns.getMetrics('completed')).meta.count;
        const total = sum(await scrapeAll(), 'bullmq_job_completed_total', { queue: 'turns' });
        return total === count && { completed: count, summed: total };
      });
      expect(completed).toBeGreaterThanOrEqual(turnsCommitted);
      expect(summed).toBe(completed);
    } finally {
      await turns.close();
    }
  }, 60_000);
});
