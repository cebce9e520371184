import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isClusterRedirect, isRedisUnavailable } from '../../src/shared/redis-errors.js';

const reply = (message: string) => new ReplyError(message);

describe('which Redis errors a client may retry', () => {
  it('counts a Cluster redirect that reached the caller as unavailable, and as a redirect', () => {
    for (const err of [
      reply('MOVED 8059 127.0.0.1:7102'),
      reply('ASK 8059 127.0.0.1:7102'),
      new Error('All keys in the pipeline should belong to the same slots allocation group'),
    ]) {
      expect(isClusterRedirect(err)).toBe(true);
      expect(isRedisUnavailable(err)).toBe(true);
    }
  });

  it('counts a server saying "not now" as unavailable, but not as a redirect', () => {
    for (const err of [
      reply('CLUSTERDOWN The cluster is down'),
      reply('TRYAGAIN Multiple keys request during rehashing of slot'),
      reply("READONLY You can't write against a read only replica."),
      reply('OOM command not allowed when used memory > maxmemory'),
    ]) {
      expect(isRedisUnavailable(err)).toBe(true);
      expect(isClusterRedirect(err)).toBe(false);
    }
  });

  it('leaves a bug a bug: a wrong command, a wrong type, a script error, a word that only starts like a redirect', () => {
    for (const err of [
      reply("ERR wrong number of arguments for 'xadd' command"),
      reply('WRONGTYPE Operation against a key holding the wrong kind of value'),
      reply('ERR user_script:12: attempt to compare nil with number'),
      reply('MOVEDX 1 2'),
      new Error('MOVED 8059 127.0.0.1:7102'),
      new TypeError("Cannot read properties of undefined (reading 'id')"),
    ]) {
      expect(isRedisUnavailable(err)).toBe(false);
      expect(isClusterRedirect(err)).toBe(false);
    }
  });
});
