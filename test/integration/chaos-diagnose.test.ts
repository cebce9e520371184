import { afterAll, describe, expect, it } from 'vitest';
import { diagnoseChat } from '../../scripts/chaos/diagnose.js';
import { ChatState } from '../../src/loadtest/chat-state.js';
import { createQueue, enqueueTurn, QUEUES, type TurnJob } from '../../src/shared/jobs.js';
import { chatKeys } from '../../src/shared/keys.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { echoScript, scriptedModel } from '../helpers/scripted-model.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

/**
 * A failed failover or chaos check prints the chats it names, read back from Redis beside
 * what the load test saw: the CI log is all a later reader has. It must name what a
 * committed turn left in each of the chat's keys.
 */

const redis = testRedis();

afterAll(async () => {
  await deleteLabel(redis, 'diagnose');
  redis.disconnect();
});

describe('chaos diagnosis of one chat', () => {
  it("shows the history's run ids, the outbox items by run, the commit's message ids and the pending inbox", async () => {
    const prefix = randomPrefix('diagnose');
    const { model } = scriptedModel(echoScript);
    const deps = turnDeps(redis, prefix, model);
    await ingestTexts(deps.store, 'c1', 'hello');
    const outcome = await runTurn(deps, 'c1');
    expect(outcome.status).toBe('done');
    const runId = outcome.status === 'done' ? outcome.runId.slice(0, 8) : '';
    await ingestTexts(deps.store, 'c1', 'later');

    const chat = new ChatState(0, 'c1');
    chat.messages.push({
      chat: 0,
      index: 0,
      id: 'id-hello',
      storedId: 'id-hello',
      text: 'hello',
      attempts: 1,
      outcome: 'accepted',
      ackAt: 5,
    });
    const lines = await diagnoseChat(redis, prefix, chat);
    const text = lines.join('\n');

    expect(lines[0]).toBe('chat c1');
    expect(text).toContain('acked id-hello@5');
    expect(text).toMatch(new RegExp(`history: user:id-hello a:${runId}\\{chat_send:output-available\\}\\n`));
    expect(text).toMatch(new RegExp(`outbox: \\d+-\\d+:${runId}\\n`));
    expect(text).toMatch(new RegExp(`turn\\.committed:${runId}\\[id-hello\\]`));
    expect(text).toMatch(/inbox: \d+-\d+:id-later\n/);
    // The lease the turn released, and the turn job the sweeper would look for (none enqueued here).
    expect(text).toMatch(/meta: deliveredTo \S+ fence 1 turns 1 owner null leaseUntil \S+\n/);
    expect(text).toContain('turn job: none (no deduplication key)');
  });

  it("shows the chat's turn job with its state, as the sweeper finds it", async () => {
    const prefix = randomPrefix('diagnose');
    const turns = createQueue<TurnJob>(prefix, QUEUES.turns, redis);
    try {
      await enqueueTurn(turns, 'c3');
      const lines = await diagnoseChat(redis, prefix, new ChatState(0, 'c3'));
      expect(lines.join('\n')).toMatch(/turn job: \S+ waiting attempts 0 delay 0 processedOn -/);
    } finally {
      await turns.close();
    }
  });

  it('says which read failed rather than throwing', async () => {
    const prefix = randomPrefix('diagnose');
    // A key of the wrong type: every read of it fails with WRONGTYPE.
    await redis.set(chatKeys(prefix, 'c2').hist, 'x');
    const lines = await diagnoseChat(redis, prefix, new ChatState(0, 'c2'));
    expect(lines.join('\n')).toMatch(/history: \(read failed: WRONGTYPE/);
  });
});
