import { afterAll, describe, expect, it } from 'vitest';
import type { ChatlaneEvent } from '../../src/shared/events.js';
import type { Chatlane } from '../../src/start/options.js';
import { startChatlane } from '../../src/start/start-chatlane.js';
import { deleteLabel, REDIS_ENV, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { scriptedModel } from '../helpers/scripted-model.js';

/**
 * startChatlane's onEvent: the events the process's roles write reach the program's handler as
 * typed objects, the same ones the HTTP API shows, and a handler that throws fails no turn.
 */

const LABEL = 'on-event';
const lanes: Chatlane[] = [];

afterAll(async () => {
  await Promise.all(lanes.map((l) => l.close()));
  const redis = testRedis();
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

async function lane(onEvent: (e: ChatlaneEvent) => void | Promise<void>): Promise<Chatlane> {
  const started = await startChatlane({
    roles: ['ingress', 'worker'],
    model: scriptedModel().model,
    tracing: false,
    onEvent,
    env: {
      ...REDIS_ENV,
      CHATLANE_PREFIX: randomPrefix(LABEL),
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      LOG_LEVEL: 'silent',
    },
  });
  lanes.push(started);
  return started;
}

const send = (url: string, chatKey: string, id: string, text: string) =>
  fetch(`${url}/v1/chats/${chatKey}/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id, text }),
  });

async function eventsOf(url: string, chatKey: string): Promise<Array<{ id: string; type: string }>> {
  const res = await fetch(`${url}/v1/chats/${chatKey}/events`);
  return ((await res.json()) as { items: Array<{ id: string; type: string }> }).items;
}

describe('onEvent', () => {
  it("hands the program every event its roles write, typed, as the chat's events show them", async () => {
    const seen: ChatlaneEvent[] = [];
    const l = await lane((e) => {
      seen.push(e);
    });
    expect((await send(l.url!, 'ada', 'm1', 'hello')).status).toBe(202);
    await waitFor(async () => seen.some((e) => e.type === 'turn.committed'), {
      what: 'turn.committed handed over',
    });
    const committed = seen.find((e) => e.type === 'turn.committed');
    if (committed?.type !== 'turn.committed') throw new Error('no commit');
    // Typed: the data of a turn.committed, without a cast.
    expect(committed.data.messageIds).toEqual(['m1']);
    expect(committed.chatKey).toBe('ada');
    const shown = await eventsOf(l.url!, 'ada');
    await waitFor(async () => seen.length >= shown.length, { what: 'every shown event handed over' });
    expect(seen.map((e) => `${e.id} ${e.type}`)).toEqual(shown.map((e) => `${e.id} ${e.type}`));
  });

  it('a handler that throws or rejects fails no turn: the chat is answered all the same', async () => {
    let calls = 0;
    const l = await lane(() => {
      calls += 1;
      if (calls === 1) throw new Error('boom');
      return Promise.reject(new Error('async boom'));
    });
    // Two messages, answered one after the other: the second turn runs after the handler threw.
    const answered = (n: number) =>
      waitFor(
        async () => {
          const res = await fetch(`${l.url}/v1/chats/bo/outbox`);
          return ((await res.json()) as { items: unknown[] }).items.length >= n;
        },
        { what: `the chat answered ${n}` },
      );
    expect((await send(l.url!, 'bo', 'm1', 'hi')).status).toBe(202);
    await answered(1);
    expect((await send(l.url!, 'bo', 'm2', 'again')).status).toBe(202);
    await answered(2);
    await waitFor(async () => calls >= 2, { what: 'the handler called' });
  });
});
