import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import {
  Fuzz,
  fuzzSeed,
  integerText,
  MAX_STREAM_CURSOR,
  MAX_STREAM_ID,
  streamCursorText,
  streamIdText,
} from '../helpers/fuzz.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { committedEventData } from '../helpers/messages.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * Every route that takes a cursor, over real HTTP against a real ingress and Redis: a cursor
 * past the end reads an empty page (or opens a stream with nothing to replay), anything that is
 * not a cursor is a 400 — never a 500, whatever the client sends.
 */

const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;
let base: string;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('cursors');
  ing = await testIngress(redis, prefix, { streams: { heartbeatMs: 60_000 } });
  base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
  const lease = await ing.store.acquire('alice', 'turn-alice', 60_000);
  if (!lease.ok) throw new Error('busy');
  for (const text of ['one', 'two'])
    await ing.store.sendOutbox('alice', lease.fence, { runId: 'r1', text, ts: 1 });
  await ing.store.appendEvent('alice', 'turn.committed', committedEventData('r1'));
});
afterEach(async () => {
  const closeAll = setInterval(() => ing.app.server.closeAllConnections(), 20);
  await ing.close();
  clearInterval(closeAll);
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

interface Answer {
  status: number;
  code?: string;
  body?: unknown;
}

/** One GET; a stream that opens (200) is read up to its `ready` event, then dropped. */
async function get(path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const abort = new AbortController();
  const res = await fetch(`${base}${path}`, { headers, signal: abort.signal });
  try {
    if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
      const reader = res.body!.getReader();
      let text = '';
      while (!text.includes('event: ready')) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      return { status: res.status, body: text };
    }
    const body = (await res.json()) as { error?: { code: string } };
    return { status: res.status, body, ...(body.error && { code: body.error.code }) };
  } finally {
    abort.abort();
  }
}

describe('a cursor past the end', () => {
  it('Last-Event-ID at the largest stream id opens the stream with nothing to replay (was 500)', async () => {
    const answer = await get('/v1/chats/alice/stream', { 'last-event-id': MAX_STREAM_CURSOR });
    expect(answer.status).toBe(200);
    expect(answer.body).toContain(`id: ${MAX_STREAM_CURSOR}\nevent: ready`);
    const viaQuery = await get(`/v1/chats/alice/stream?lastEventId=${encodeURIComponent(MAX_STREAM_CURSOR)}`);
    expect(viaQuery.status).toBe(200);
  });

  it('?after= the largest stream id on the outbox and the events is an empty page (was 500)', async () => {
    for (const list of ['outbox', 'events']) {
      const answer = await get(`/v1/chats/alice/${list}?after=${MAX_STREAM_ID}`);
      expect(answer, list).toEqual({ status: 200, body: { items: [], next: MAX_STREAM_ID } });
    }
  });

  it('?after= a huge archive index is an empty page; past 2^53, a fraction or a sign is 400 INVALID_CURSOR', async () => {
    for (const after of ['1000000000000000', '9007199254740991']) {
      expect(await get(`/v1/chats/alice/archive?after=${after}`)).toEqual({
        status: 200,
        body: { items: [], next: Number(after) },
      });
    }
    for (const after of ['9007199254740992', '1e300', '1.5', '-1', '', '18446744073709551615']) {
      expect(await get(`/v1/chats/alice/archive?after=${after}`), after).toMatchObject({
        status: 400,
        code: 'INVALID_CURSOR',
      });
    }
  });

  it('a cursor that is not one is 400 INVALID_CURSOR on every list and the stream', async () => {
    for (const path of ['outbox', 'events']) {
      expect(await get(`/v1/chats/alice/${path}?after=18446744073709551616-0`)).toMatchObject({
        status: 400,
        code: 'INVALID_CURSOR',
      });
    }
    expect(
      await get('/v1/chats/alice/stream', { 'last-event-id': '0-0.18446744073709551616-0' }),
    ).toMatchObject({
      status: 400,
      code: 'INVALID_CURSOR',
    });
  });
});

/** A value fetch can send as a header (Latin-1, no controls); others go percent-encoded. */
const headerSafe = (value: string) => (/^[\x20-\x7e]*$/.test(value) ? value : encodeURIComponent(value));

describe('generated cursors on every cursor route', () => {
  it('answer 200 or 400 (INVALID_CURSOR, VALIDATION_FAILED), never 5xx', async () => {
    const seed = fuzzSeed();
    const f = new Fuzz(seed);
    const requests: Array<() => Promise<[string, Answer]>> = [];
    for (let i = 0; i < 1200; i++) {
      const kind = f.int(5);
      const chat = f.chance(0.5) ? 'alice' : `fz${i}`;
      const q = encodeURIComponent;
      let path: string;
      let headers: Record<string, string> = {};
      if (kind === 0) path = `/v1/chats/${chat}/outbox?after=${q(streamIdText(f))}`;
      else if (kind === 1)
        path = `/v1/chats/${chat}/events?after=${q(streamIdText(f))}&limit=${q(integerText(f))}`;
      else if (kind === 2) path = `/v1/chats/${chat}/archive?after=${q(integerText(f))}`;
      else if (kind === 3) {
        // A new chat per stream: the per-chat stream cap is not what this test is about.
        path = `/v1/chats/fz-stream-${i}/stream`;
        headers = { 'last-event-id': headerSafe(streamCursorText(f)) };
      } else path = `/v1/chats/fz-stream-${i}/stream?lastEventId=${q(streamCursorText(f))}`;
      requests.push(async () => [`${path} ${JSON.stringify(headers)}`, await get(path, headers)]);
    }
    const answers: Array<[string, Answer]> = [];
    // A few at a time, like clients would: the point is the answers, not load.
    for (let i = 0; i < requests.length; i += 8) {
      answers.push(...(await Promise.all(requests.slice(i, i + 8).map((r) => r()))));
    }
    const wrong = answers.filter(
      ([, a]) =>
        !(
          a.status === 200 ||
          (a.status === 400 && ['INVALID_CURSOR', 'VALIDATION_FAILED'].includes(a.code!))
        ),
    );
    expect(wrong.slice(0, 5), `FUZZ_SEED=${seed}`).toEqual([]);
    // The generator reaches both sides.
    expect(answers.filter(([, a]) => a.status === 200).length).toBeGreaterThan(50);
    expect(answers.filter(([, a]) => a.status === 400).length).toBeGreaterThan(50);
  });
});
