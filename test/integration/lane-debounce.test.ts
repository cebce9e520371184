import type { Queue } from 'bullmq';
import { beforeEach, describe, expect, it } from 'vitest';
import { createIngest, type Ingest } from '../../src/ingress/ingest.js';
import { QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { queuePrefix } from '../../src/shared/keys.js';
import { LanePolicies, type LaneSettings } from '../../src/shared/lane-policy.js';
import { silentLogger } from '../../src/shared/logger.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { sweepChat } from '../../src/worker/upkeep/sweeper.js';
import { userMessage } from '../helpers/messages.js';
import { testRedis } from '../helpers/redis.js';
import { useTurnsSuite } from '../helpers/turns-suite.js';

const suite = useTurnsSuite('debounce');
const { redis } = suite;
let prefix: string;
let store: ChatStore;
let turns: Queue<TurnJob>;

beforeEach(() => {
  ({ prefix, store, turns } = suite);
});

const DEBOUNCE: LaneSettings = { policy: 'merge', debounceMs: 2000, debounceMaxMs: 8000, maxInterrupts: 3 };

function ingestWith(settings: LaneSettings, channels = new Map<string, LaneSettings>(), on = store): Ingest {
  return createIngest({
    store: on,
    turns,
    limits: { maxPendingPerChat: 1000, dedupWindowMs: 60_000 },
    lanes: new LanePolicies(settings, channels),
  });
}

const send = (ingest: Ingest, chatKey: string, id: string, channel = 'api') =>
  ingest({ chatKey, message: userMessage(chatKey, id, id, { channel }) });

async function jobOf(chatKey: string): Promise<{ id: string; state: string; runAt: number | undefined }> {
  const id = await turns.getDeduplicationJobId(chatKey);
  if (!id) throw new Error(`no job for ${chatKey}`);
  const score = await redis.zscore(`${queuePrefix(prefix, QUEUES.turns)}:${QUEUES.turns}:delayed`, id);
  // BullMQ keeps a delayed job's time in ms × 4096 (plus an order counter).
  return {
    id,
    state: await turns.getJobState(id),
    runAt: score === null ? undefined : Math.floor(Number(score) / 0x1000),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The time (ms) of the inbox's first entry: when the burst began, by Redis's clock. */
async function firstArrival(chatKey: string): Promise<number> {
  const [first] = await store.readInbox(chatKey, 1);
  return Number(first!.streamId.split('-')[0]);
}

describe('debounce at ingest (BullMQ delay and deduplication)', () => {
  it("adds an idle chat's turn delayed by the debounce, and each message of the burst moves the same job later", async () => {
    const ingest = ingestWith(DEBOUNCE);
    await send(ingest, 'idle', 'm1');
    const first = await jobOf('idle');
    expect(first.state).toBe('delayed');
    const started = await firstArrival('idle');
    expect(first.runAt! - started).toBeGreaterThan(DEBOUNCE.debounceMs - 500);
    expect(first.runAt! - started).toBeLessThanOrEqual(DEBOUNCE.debounceMs + 500);

    await sleep(300);
    await send(ingest, 'idle', 'm2');
    const second = await jobOf('idle');
    // The same job (same id, its attempts kept), due later: BullMQ's reschedule, not a new job.
    expect(second.id).toBe(first.id);
    expect(second.state).toBe('delayed');
    expect(second.runAt!).toBeGreaterThanOrEqual(first.runAt! + 250);
    expect(await turns.getJobCounts('delayed', 'waiting')).toMatchObject({ delayed: 1, waiting: 0 });
  });

  it('holds the cap with a steady trickle: the job never moves past the max wait after the first message', async () => {
    const capped: LaneSettings = { ...DEBOUNCE, debounceMs: 600, debounceMaxMs: 1500 };
    const ingest = ingestWith(capped);
    await send(ingest, 'trickle', 't0');
    const started = await firstArrival('trickle');
    let last = (await jobOf('trickle')).runAt!;
    // A message every 200 ms for 3 s: each alone would keep the job 600 ms away forever.
    for (let i = 1; i <= 15; i++) {
      await sleep(200);
      await send(ingest, 'trickle', `t${i}`);
      const job = await jobOf('trickle');
      // No worker runs here, so the job stays in `delayed` even once it is due.
      expect(job.state).toBe('delayed');
      // Each time is the ingress's clock plus a delay measured on Redis's: a few ms of jitter.
      expect(job.runAt!).toBeGreaterThanOrEqual(last - 50);
      expect(job.runAt! - started).toBeLessThanOrEqual(capped.debounceMaxMs + 50);
      last = job.runAt!;
    }
    // The trickle outlasted the cap: the job is due at the cap, not a debounce after the last message.
    expect(last - started).toBeGreaterThan(capped.debounceMaxMs - 100);
  });

  it('does not debounce a busy lane: with a turn holding the lease the job is added to wait', async () => {
    const ingest = ingestWith(DEBOUNCE);
    const lease = await store.acquire('busy', 'a-turn', 60_000);
    expect(lease.ok).toBe(true);
    await send(ingest, 'busy', 'b1');
    expect((await jobOf('busy')).state).toBe('waiting');
  });

  it('leaves a message of a channel without debounce (the web by default) to start its turn at once', async () => {
    const web: LaneSettings = { ...DEBOUNCE, debounceMs: 0, debounceMaxMs: 0 };
    const ingest = ingestWith(DEBOUNCE, new Map([['web', web]]));
    await send(ingest, 'page', 'w1', 'web');
    expect((await jobOf('page')).state).toBe('waiting');
    await send(ingest, 'bot', 'x1', 'telegram');
    expect((await jobOf('bot')).state).toBe('delayed');
  });

  it("extends one wait across ingress processes: a second ingress's message moves the same job", async () => {
    const other = testRedis('ingress');
    try {
      const a = ingestWith(DEBOUNCE);
      const b = ingestWith(DEBOUNCE, new Map(), new ChatStore(other, { prefix, maxEvents: 100 }));
      await send(a, 'two', 'a1');
      const first = await jobOf('two');
      await sleep(300);
      await send(b, 'two', 'b1');
      const second = await jobOf('two');
      expect(second.id).toBe(first.id);
      expect(second.runAt!).toBeGreaterThanOrEqual(first.runAt! + 250);
    } finally {
      other.disconnect();
    }
  });

  it("a debounced chat is not stranded in the sweeper's eyes: its delayed job counts as queued", async () => {
    const ingest = ingestWith(DEBOUNCE);
    await send(ingest, 'waiting-out', 'w1');
    const job = await jobOf('waiting-out');
    expect(await sweepChat({ store, turns, logger: silentLogger() }, 'waiting-out')).toBe('queued');
    expect(await jobOf('waiting-out')).toMatchObject({ id: job.id, state: 'delayed' });
    const events = await store.readEvents('waiting-out', undefined, 10);
    expect(events.filter((e) => e.type === 'sweep.requeued')).toEqual([]);
  });
});
