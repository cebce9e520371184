import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { loadConfig } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { createMetrics } from '../../src/shared/metrics.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { RunningTurns } from '../../src/worker/turn/running-turns.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../../src/worker/turn/turn-deps.js';
import { userMessage } from '../helpers/messages.js';
import { deletePrefix, REDIS_ENV, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * More than ten turns at once used to print "MaxListenersExceededWarning: Possible
 * EventTarget memory leak detected. 11 abort listeners added to [AbortSignal]" on every busy
 * worker: each turn added a listener to the worker's one shutdown signal. Fifty turns here,
 * through the production wiring and a real HTTP model call each (the SDK's own signals too).
 */

const redis = testRedis();
const prefix = randomPrefix('listeners');
let mock: Awaited<ReturnType<typeof startMockLlm>>;

beforeAll(async () => {
  mock = await startMockLlm({ port: 0, latencyMs: [100, 200] });
});
afterAll(async () => {
  await mock.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

describe('many turns at once', () => {
  it('50 concurrent turns add no listener leak warning, and shutdown tracking ends empty', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const config = loadConfig({
        ...REDIS_ENV,
        LLM_BASE_URL: mock.url,
        LLM_MODEL: 'mock',
        CHATLANE_PREFIX: prefix,
      });
      const store = new ChatStore(redis, { prefix, maxEvents: 100 });
      const running = new RunningTurns();
      const deps = {
        ...turnDepsFromConfig(config, store, silentLogger(), { metrics: createMetrics() }),
        running,
      };
      const chats = Array.from({ length: 50 }, (_, i) => `c${i}`);
      for (const chatKey of chats) {
        await store.ingest(chatKey, userMessage(chatKey, 'm1', `hello ${chatKey}`), {
          maxPending: 10,
          dedupWindowMs: 60_000,
        });
      }
      let peak = 0;
      const watch = setInterval(() => {
        peak = Math.max(peak, running.size);
      }, 5);
      const outcomes = await Promise.all(chats.map((chatKey) => runTurn(deps, chatKey)));
      clearInterval(watch);
      expect(outcomes.every((o) => o.status === 'done')).toBe(true);
      // They really overlapped: far more than ten at once.
      expect(peak).toBeGreaterThan(10);
      expect(running.size).toBe(0);
      // Warnings are emitted on the next tick.
      await new Promise((r) => setTimeout(r, 50));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message)).toEqual(
        [],
      );
    } finally {
      process.off('warning', onWarning);
    }
  });
});
