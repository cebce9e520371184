import { afterAll, describe, expect, it } from 'vitest';
import { ActivityIndex } from '../../src/ingress/activity.js';
import { chatsIndexKey } from '../../src/shared/keys.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

const redis = testRedis();
const prefix = randomPrefix('activity');
afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

describe('ActivityIndex', () => {
  it('writes a chat into the index at most once per interval, then again once it has passed', async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 10 });
    const index = new ActivityIndex(store, 1000);
    await index.touch('c1', 10_000);
    await index.touch('c1', 10_500);
    expect(await redis.zscore(chatsIndexKey(prefix), 'c1')).toBe('10000');
    await index.touch('c1', 11_000);
    expect(await redis.zscore(chatsIndexKey(prefix), 'c1')).toBe('11000');
    await index.touch('c2', 10_600);
    expect(await redis.zscore(chatsIndexKey(prefix), 'c2')).toBe('10600');
  });

  it('does not remember a touch that failed, so the next message retries it', async () => {
    const store = new ChatStore(redis, { prefix, maxEvents: 10 });
    let fail = true;
    const flaky = Object.assign(Object.create(store) as ChatStore, {
      touchChat: async (chatKey: string, at?: number) => {
        if (fail) throw new Error('redis down');
        return store.touchChat(chatKey, at);
      },
    });
    const index = new ActivityIndex(flaky, 1000);
    await expect(index.touch('c3', 20_000)).rejects.toThrow('redis down');
    fail = false;
    await index.touch('c3', 20_100);
    expect(await redis.zscore(chatsIndexKey(prefix), 'c3')).toBe('20100');
  });
});
