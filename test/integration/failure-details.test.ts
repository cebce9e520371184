import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { failBatch, markFailed } from '../../src/shared/store/failures.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { userMessage } from '../helpers/messages.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/**
 * A failure as each token reads it (docs/security.md, "Failure details"): a browser token gets
 * the code and a generic sentence, in the chat's messages and on its live stream; the API token
 * gets the worker's detail (here, what a refused file URL resolved to).
 */

const API_TOKEN = 'an-api-token-of-at-least-32-characters';
const SECRET = 'a-web-token-secret-of-at-least-32-characters';
const DETAIL = 'files.internal.example resolves to a private address (10.1.2.3)';
const CHAT = 'failed-chat';
const redis = testRedis('ingress');
const prefix = randomPrefix('faildetail');
let ing: TestIngress;
let base: string;
const sources: EventSource[] = [];

beforeAll(async () => {
  await waitReady(redis);
  ing = await testIngress(redis, prefix, { apiToken: API_TOKEN, web: { tokenSecret: SECRET } });
  base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
  // A message whose file the worker refused, written by the script a worker's failed turn runs.
  await ing.store.ingest(CHAT, userMessage(CHAT, 'm1', 'look at this file'), {
    maxPending: 10,
    dedupWindowMs: 60_000,
  });
  const [entry] = await ing.store.readInbox(CHAT, 10);
  const lease = await ing.store.acquire(CHAT, 'turn', 5000);
  if (!lease.ok) throw new Error('busy');
  const failed = await failBatch(ing.store, CHAT, lease.fence, {
    runId: 'r1',
    consumed: [entry!.streamId],
    messages: [markFailed(entry!.message, 'FILE_REFUSED', DETAIL)],
    notice: 'Sorry, please send it again.',
    ts: Date.now(),
    code: 'FILE_REFUSED',
    event: { worker: 'w1', error: DETAIL, messages: ['m1'] },
  });
  expect(failed.ok).toBe(true);
  await ing.store.appendEvent(CHAT, 'turn.failed', {
    runId: 'r2',
    error: 'connect ECONNREFUSED 10.1.2.4:8080',
    reason: 'model_unavailable',
  });
});
afterAll(async () => {
  for (const es of sources) es.close();
  await ing.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

const messagesAs = async (token: string) => {
  const res = await ing.app.inject({
    method: 'GET',
    url: `/v1/ui/${CHAT}/messages`,
    headers: { authorization: `Bearer ${token}` },
  });
  expect(res.statusCode).toBe(200);
  return res;
};

/** The chat events a real EventSource receives on the live stream with `token`. */
async function streamedEvents(
  token: string,
): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
  const events: Array<{ type: string; data: Record<string, unknown> }> = [];
  const es = new EventSource(`${base}/v1/chats/${CHAT}/stream`, {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        // From the start of both streams: the events are already there.
        headers: {
          ...(init?.headers as object),
          authorization: `Bearer ${token}`,
          'last-event-id': '0-0.0-0',
        },
      }),
  });
  sources.push(es);
  es.addEventListener('event', (e) => events.push(JSON.parse(e.data)));
  await waitFor(async () => events.filter((e) => e.type === 'turn.failed').length === 2, {
    what: 'both turn.failed events',
  });
  es.close();
  return events.filter((e) => e.type === 'turn.failed');
}

describe('a browser token', () => {
  it("reads a failed message's code and a generic sentence, never the detail", async () => {
    const res = await messagesAs(await mintWebToken(SECRET, CHAT));
    expect(res.body).not.toContain('10.1.2.3');
    const failed = res.json().messages.find((m: { id: string }) => m.id === 'm1');
    expect(failed.metadata).toMatchObject({
      failed: true,
      failure: { code: 'FILE_REFUSED', detail: 'a file of the message could not be fetched' },
    });
  });

  it('reads turn.failed events on the live stream without the error detail', async () => {
    const events = await streamedEvents(await mintWebToken(SECRET, CHAT));
    expect(JSON.stringify(events)).not.toMatch(/10\.1\.2\.[34]/);
    expect(events.map((e) => [e.data.reason, e.data.error])).toEqual([
      ['FILE_REFUSED', 'a file of the message could not be fetched'],
      ['model_unavailable', 'the model is unavailable; the message waits for it'],
    ]);
  });
});

describe('the API token', () => {
  it('reads the detail, on the /v1/ui view and the operator view of the messages', async () => {
    const ui = await messagesAs(API_TOKEN);
    const failed = ui.json().messages.find((m: { id: string }) => m.id === 'm1');
    expect(failed.metadata.failure).toEqual({ code: 'FILE_REFUSED', detail: DETAIL });
    const operator = await ing.app.inject({
      method: 'GET',
      url: `/v1/chats/${CHAT}/messages`,
      headers: { authorization: `Bearer ${API_TOKEN}` },
    });
    expect(operator.body).toContain(DETAIL);
  });

  it('reads turn.failed events on the live stream with the error detail', async () => {
    const events = await streamedEvents(API_TOKEN);
    expect(events.map((e) => e.data.error)).toEqual([DETAIL, 'connect ECONNREFUSED 10.1.2.4:8080']);
  });
});
