import { afterAll, describe, expect, it } from 'vitest';
import { createIngest } from '../../src/ingress/ingest.js';
import { createQueue, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { laneArrivalsChannel } from '../../src/shared/keys.js';
import { LanePolicies } from '../../src/shared/lane-policy.js';
import { silentLogger } from '../../src/shared/logger.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { StepInterrupt } from '../../src/worker/agent/step-interrupt.js';
import { type Arrival, interruptOnArrival, LaneArrivals } from '../../src/worker/turn/lane-policy.js';
import { userMessage } from '../helpers/messages.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

const redis = testRedis();
const prefix = randomPrefix('interrupt');
const store = new ChatStore(redis, { prefix, maxEvents: 100 });
const turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
const ingest = createIngest({
  store,
  turns,
  limits: { maxPendingPerChat: 100, dedupWindowMs: 60_000 },
  lanes: new LanePolicies({ policy: 'interrupt', debounceMs: 0, debounceMaxMs: 0, maxInterrupts: 2 }),
});
const arrivals = new LaneArrivals(testRedis(), prefix, silentLogger());

afterAll(async () => {
  await arrivals.close();
  await turns.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const PROBE = '0-1';

/**
 * Watches the chat and waits until its subscription is in place (a probe publish comes back);
 * `seen` gets every announcement but the probes.
 */
async function watching(chatKey: string, seen: Arrival[]): Promise<() => void> {
  let probed = false;
  const unwatch = arrivals.watch(chatKey, (a) => {
    if (a.streamId === PROBE) probed = true;
    else seen.push(a);
  });
  await waitFor(
    async () => {
      await redis.publish(laneArrivalsChannel(prefix, chatKey), `${PROBE} 0`);
      return probed;
    },
    { what: 'the subscription', intervalMs: 100 },
  );
  return unwatch;
}

describe('LANE_POLICY=interrupt: the ingest tells a running turn, and only a running one', () => {
  it('announces a message with its stream id and its channel’s cap while a turn holds the lease', async () => {
    const seen: Arrival[] = [];
    const unwatch = await watching('told', seen);
    await ingest({ chatKey: 'told', message: userMessage('told', 'idle-1', 'nobody runs') });
    const lease = await store.acquire('told', 'a-turn', 60_000);
    expect(lease.ok).toBe(true);
    await ingest({ chatKey: 'told', message: userMessage('told', 'busy-1', 'a turn runs') });
    const [entry] = await store.readInbox('told', 10, (await store.readInbox('told', 1))[0]!.streamId);
    await waitFor(async () => seen.length > 0, { what: 'the announcement' });
    await sleep(100);
    expect(seen).toEqual([{ streamId: entry!.streamId, maxInterrupts: 2 }]);
    unwatch();
  });

  it('hears a chat watched while its connection is still connecting (the handshake race of ioredis 5)', async () => {
    // The race struck about one new connection in ten: 30 fresh ones, each watched after a
    // random few ms of connecting, each must hear its probe.
    const deaf: number[] = [];
    for (let i = 0; i < 30; i++) {
      const fresh = new LaneArrivals(testRedis(), prefix, silentLogger());
      try {
        await sleep(Math.random() * 15);
        let heard = false;
        fresh.watch(`fresh-${i}`, () => {
          heard = true;
        });
        const channel = laneArrivalsChannel(prefix, `fresh-${i}`);
        const until = Date.now() + 3000;
        while (!heard && Date.now() < until) {
          await redis.publish(channel, `${PROBE} 0`);
          await sleep(50);
        }
        if (!heard) deaf.push(i);
      } finally {
        await fresh.close();
      }
    }
    expect(deaf).toEqual([]);
  });

  it('stops listening once the turn unwatches', async () => {
    const seen: Arrival[] = [];
    const unwatch = await watching('gone', seen);
    unwatch();
    await store.acquire('gone', 'a-turn', 60_000);
    await ingest({ chatKey: 'gone', message: userMessage('gone', 'g1', 'late') });
    const other: Arrival[] = [];
    // A watch of another chat proves the connection still delivers.
    const unwatchOther = await watching('other', other);
    await store.acquire('other', 'a-turn', 60_000);
    await ingest({ chatKey: 'other', message: userMessage('other', 'o1', 'here') });
    await waitFor(async () => other.length > 0, { what: 'the other chat’s announcement' });
    expect(seen).toEqual([]);
    unwatchOther();
  });

  it('raises the interrupt for a message the turn has not seen, until its cap', async () => {
    const interrupt = new StepInterrupt();
    let lastSeen = '5-0';
    let raised = 0;
    const raise = interrupt.raise.bind(interrupt);
    interrupt.raise = () => {
      raised += 1;
      return raise();
    };
    const unwatch = interruptOnArrival(
      arrivals,
      'capped',
      { lastSeen: () => lastSeen, merged: () => 0, maxMerges: 8 },
      interrupt,
    );
    await watching('capped', []);
    const channel = laneArrivalsChannel(prefix, 'capped');
    const callOnce = () => {
      interrupt.signalFor(new AbortController().signal);
      interrupt.modelCallStarts();
    };
    callOnce();
    await redis.publish(channel, '4-0 1');
    await sleep(150);
    // Seen already (merged at a step boundary before the announcement came): no interrupt.
    expect(raised).toBe(0);
    await redis.publish(channel, '6-0 1');
    await waitFor(async () => interrupt.count === 1, { what: 'the interrupt' });
    lastSeen = '6-0';
    callOnce();
    await redis.publish(channel, '7-0 1');
    await sleep(150);
    // The cap (1, as the message's channel says) is reached: the call goes on.
    expect(interrupt.count).toBe(1);
    expect(raised).toBe(1);
    unwatch();
  });
});
