import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/shared/logger.js';
import { waitReady } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { type ReplyEntry, ReplyStreams } from '../../src/shared/store/reply-streams.js';
import { ReplyWriter } from '../../src/worker/turn/reply-writer.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

/** The worker's reply stream writer against a real Redis: what it writes, in how many script calls. */

const redis = testRedis();
const prefix = randomPrefix('writer');
const store = new ChatStore(redis, { prefix, maxEvents: 100 });

/** ReplyStreams that keeps the chunk types of every write call. */
class CountedStreams extends ReplyStreams {
  readonly calls: string[][] = [];
  override write(...args: Parameters<ReplyStreams['write']>): ReturnType<ReplyStreams['write']> {
    this.calls.push(
      args[4].map(([f, v]) => (f === 'c' ? (JSON.parse(v) as { type: string }).type : 'answers')),
    );
    return super.write(...args);
  }
}

beforeAll(() => waitReady(redis));
afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

const types = (entries: ReplyEntry[]) => entries.map((e) => (e.kind === 'chunk' ? e.chunk.type : 'answers'));

async function writerFor(chatKey: string, runId: string) {
  const lease = await store.acquire(chatKey, `w:${runId}`, 60_000);
  if (!lease.ok) throw new Error('busy');
  const replies = new CountedStreams(redis, { prefix, maxEvents: 100, maxLen: 100, ttlMs: 60_000 });
  const hooks = { stop: () => undefined, fencedOut: () => undefined };
  const writer = new ReplyWriter(replies, chatKey, lease.fence, runId, silentLogger(), hooks, undefined);
  return { writer, replies };
}

describe('ReplyWriter', () => {
  it('joins a part’s text deltas into one entry, and a step’s finish-step waits for the next write (here the close)', async () => {
    const { writer, replies } = await writerFor('steps', 'run-1');
    writer.open(['m1']);
    for (const chunk of [
      { type: 'start-step' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'hel' },
      { type: 'text-delta', id: 't', delta: 'lo' },
      { type: 'text-end', id: 't' },
    ]) {
      writer.chunk(chunk);
    }
    await waitFor(async () => types(await replies.read('steps', 'run-1')).includes('text-end'), {
      what: 'the step written',
    });
    const entries = await replies.read('steps', 'run-1');
    expect(types(entries)).toEqual([
      'answers',
      'start',
      'start-step',
      'text-start',
      'text-delta',
      'text-end',
    ]);
    expect(entries.find((e) => e.kind === 'chunk' && e.chunk.type === 'text-delta')).toMatchObject({
      chunk: { delta: 'hello' },
    });
    // The step ends (the tool ran): nothing new to show, so no write of its own, however long
    // the next step takes.
    writer.chunk({ type: 'finish-step' });
    await new Promise((resolve) => setTimeout(resolve, 100));

    expect(replies.calls).toEqual([
      ['answers', 'start'],
      ['start-step', 'text-start', 'text-delta', 'text-end'],
    ]);
    // The turn ends: the step's end goes out with the reply's last chunk, in one write.
    await writer.close([{ type: 'finish' }]);
    expect(replies.calls.at(-1)).toEqual(['finish-step', 'finish']);
    expect(replies.calls).toHaveLength(3);
  });

  it('a finish-step alone is written when the turn ends another way (close)', async () => {
    const { writer, replies } = await writerFor('close', 'run-2');
    writer.open(['m1']);
    writer.chunk({ type: 'finish-step' });
    await writer.close([{ type: 'abort' }]);
    expect(types(await replies.read('close', 'run-2'))).toEqual(['answers', 'start', 'finish-step', 'abort']);
  });
});
