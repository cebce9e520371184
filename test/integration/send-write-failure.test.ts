import { afterAll, describe, expect, it, vi } from 'vitest';
import { runTurn } from '../../src/worker/turn/turn.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { echoScript, scriptedModel } from '../helpers/scripted-model.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

/**
 * A chat_send whose outbox write fails (Redis gone mid-failover: the failover run found
 * turns committed with `chat_send` in `output-error` and nothing in the outbox). Given to
 * the model as a tool error, the turn went on and committed an answer the person never got.
 * It must end the turn instead, so that the job's retry answers the message.
 */

const redis = testRedis();

afterAll(async () => {
  await deleteLabel(redis, 'send-fail');
  redis.disconnect();
});

describe('a chat_send whose write fails', () => {
  it('ends the turn uncommitted with the Redis error, and the retry answers the message once', async () => {
    const prefix = randomPrefix('send-fail');
    const scripted = scriptedModel(echoScript);
    const deps = turnDeps(redis, prefix, scripted.model);
    const { store } = deps;
    await ingestTexts(store, 'c', 'hello');
    // The connection drops while the script is on its way (ioredis's own error).
    const write = vi.spyOn(store, 'sendOutbox').mockRejectedValueOnce(new Error('Connection is closed.'));

    await expect(runTurn(deps, 'c')).rejects.toThrow('Connection is closed.');
    // Ended at the failed write: no second model call to read a tool error.
    expect(scripted.calls()).toBe(1);
    expect(await store.readHistory('c')).toEqual([]);
    expect(await store.pendingCount('c')).toBe(1);
    expect(await store.readOutbox('c', undefined, 10)).toEqual([]);
    const events = await store.readEvents('c', undefined, 50);
    expect(events.filter((e) => e.type === 'turn.committed')).toEqual([]);
    expect(events.find((e) => e.type === 'turn.failed')?.data).toMatchObject({ reason: 'retry' });

    // The job's retry: a new run, the write goes through.
    const retry = await runTurn(deps, 'c');
    expect(retry.status).toBe('done');
    expect(write).toHaveBeenCalledTimes(2);
    expect((await store.readOutbox('c', undefined, 10)).map((o) => o.text)).toEqual(['echo: hello']);
    const history = await store.readHistory('c');
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
    const send = history[1]!.parts.find((p) => p.type === 'tool-chat_send');
    expect(send).toMatchObject({ state: 'output-available' });
  });
});

describe('a commit on a server that lacks one of its sends', () => {
  it('is refused (a failover took the send): nothing is committed and the retry answers again', async () => {
    const prefix = randomPrefix('send-fail');
    const scripted = scriptedModel(async (prompt, call, options) => {
      if (call === 1) {
        // The send went to the old primary and did not survive it: this server never saw it.
        const keys = store.keys('c');
        const [item] = await store.readOutbox('c', undefined, 1);
        await redis.del(keys.uncommitted);
        if (item) await redis.xdel(keys.outbox, item.id);
      }
      return echoScript(prompt, call, options);
    });
    const deps = turnDeps(redis, prefix, scripted.model);
    const { store } = deps;
    await ingestTexts(store, 'c', 'hello');

    await expect(runTurn(deps, 'c')).rejects.toThrow(/connection to Redis changed/);
    expect(await store.readHistory('c')).toEqual([]);
    expect(await store.pendingCount('c')).toBe(1);

    const retry = await runTurn(deps, 'c');
    expect(retry.status).toBe('done');
    expect((await store.readOutbox('c', undefined, 10)).map((o) => o.text)).toEqual(['echo: hello']);
    expect((await store.readHistory('c')).map((m) => m.role)).toEqual(['user', 'assistant']);
  });
});
