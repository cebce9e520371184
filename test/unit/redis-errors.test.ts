import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isClusterRedirect, isRedisUnavailable } from '../../src/shared/redis-errors.js';

const reply = (message: string) => new ReplyError(message);

/** [name, may a client retry it (isRedisUnavailable), is it a redirect (isClusterRedirect), error] */
const CASES: Array<[string, boolean, boolean, Error]> = [
  // A Cluster redirect that reached the caller.
  ['MOVED', true, true, reply('MOVED 8059 127.0.0.1:7102')],
  ['ASK', true, true, reply('ASK 8059 127.0.0.1:7102')],
  [
    'slots split',
    true,
    true,
    new Error('All keys in the pipeline should belong to the same slots allocation group'),
  ],
  // A server saying "not now".
  ['CLUSTERDOWN', true, false, reply('CLUSTERDOWN The cluster is down')],
  ['TRYAGAIN', true, false, reply('TRYAGAIN Multiple keys request during rehashing of slot')],
  ['READONLY', true, false, reply("READONLY You can't write against a read only replica.")],
  ['OOM', true, false, reply('OOM command not allowed when used memory > maxmemory')],
  // A bug stays a bug.
  ['ERR', false, false, reply("ERR wrong number of arguments for 'xadd' command")],
  ['WRONGTYPE', false, false, reply('WRONGTYPE Operation against a key holding the wrong kind of value')],
  ['a script error', false, false, reply('ERR user_script:12: attempt to compare nil with number')],
  ['a word that only starts like a redirect', false, false, reply('MOVEDX 1 2')],
  ['MOVED in a plain Error, not a reply', false, false, new Error('MOVED 8059 127.0.0.1:7102')],
  ['a TypeError', false, false, new TypeError("Cannot read properties of undefined (reading 'id')")],
];

describe('which Redis errors a client may retry', () => {
  it.each(CASES)('%s: retry %s, redirect %s', (_name, unavailable, redirect, err) => {
    expect(isRedisUnavailable(err)).toBe(unavailable);
    expect(isClusterRedirect(err)).toBe(redirect);
  });
});
