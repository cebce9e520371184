import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { PollerLease } from '../../src/shared/store/poller-lease.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';

const redis = testRedis();
const prefix = randomPrefix('plr');

beforeAll(() => waitReady(redis));
afterEach(() => deletePrefix(redis, prefix));
afterAll(() => redis.disconnect());

describe('the poller lease', () => {
  it('has one holder; a successor gets a newer fence after expiry and the stale holder cannot renew', async () => {
    const a = new PollerLease(redis, prefix, 'telegram', 'host-a');
    const b = new PollerLease(redis, prefix, 'telegram', 'host-b');
    const held = await a.acquire(300);
    expect(held).toBe('1:host-a');
    expect(await b.acquire(300)).toBeUndefined();
    expect(await a.renew(held!, 300)).toBe(true);
    const taken = await waitFor(async () => b.acquire(10_000), { what: 'the lease to expire' });
    expect(taken).toBe('2:host-b');
    expect(await a.renew(held!, 10_000)).toBe(false);
    await a.release(held!);
    expect(await b.renew(taken, 10_000)).toBe(true);
    await b.release(taken);
    expect(await a.acquire(300)).toBe('3:host-a');
  });
});
