import { createHash } from 'node:crypto';
import { type RedisClient, refreshSlotsOnRedirect } from '../redis.js';
import { LUA_SOURCES } from './lua-sources.js';

export type { RedisClient };

/**
 * One Lua script file (./lua, compiled into ./lua-sources.ts at build time with its includes:
 * nothing is read from disk when chatlane loads). Runs by EVALSHA and falls back to EVAL once
 * when the server has not seen it (restart, failover, new Cluster node).
 */
export class LuaScript {
  readonly source: string;
  readonly sha: string;

  /** variadic: `numberOfKeys` named keys, then any number more (listed in the script header). */
  readonly variadic: boolean;

  constructor(
    readonly name: string,
    readonly numberOfKeys: number,
    opts: { variadic?: boolean } = {},
  ) {
    this.variadic = opts.variadic ?? false;
    const source = LUA_SOURCES[name];
    if (source === undefined) {
      throw new Error(
        `${name}.lua is not in lua-sources.ts: run node scripts/lua-modules.mjs (npm run build does)`,
      );
    }
    this.source = source;
    this.sha = createHash('sha1').update(this.source).digest('hex');
  }

  async run(redis: RedisClient, keys: string[], args: Array<string | number>): Promise<unknown> {
    if (this.variadic ? keys.length < this.numberOfKeys : keys.length !== this.numberOfKeys) {
      const takes = `${this.variadic ? 'at least ' : ''}${this.numberOfKeys}`;
      throw new Error(`${this.name}.lua takes ${takes} keys, got ${keys.length}`);
    }
    try {
      return await (redis.evalsha as Script).call(redis, this.sha, keys.length, keys, args);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
        return (redis.eval as Script).call(redis, this.source, keys.length, keys, args);
      }
      refreshSlotsOnRedirect(redis, err);
      throw err;
    }
  }
}

/**
 * EVALSHA / EVAL with the keys and the arguments as two arrays: ioredis flattens array
 * arguments one level into the command (its typings only say so for one array). Spreading
 * them instead built two more copies of both per call, held until Redis answered.
 */
type Script = (
  this: RedisClient,
  script: string,
  numberOfKeys: number,
  keys: string[],
  args: Array<string | number>,
) => Promise<unknown>;

export const scripts = {
  ingest: new LuaScript('ingest', 4),
  acquire: new LuaScript('acquire', 8),
  renew: new LuaScript('renew', 2),
  renewMany: new LuaScript('renew-many', 2, { variadic: true }),
  commit: new LuaScript('commit', 7),
  fail: new LuaScript('fail', 7),
  budgetHold: new LuaScript('budget-hold', 7),
  outbox: new LuaScript('outbox', 6),
  finish: new LuaScript('finish', 4),
  sweepCheck: new LuaScript('sweep-check', 4),
  compact: new LuaScript('compact', 5),
  archiveRead: new LuaScript('archive-read', 2),
  chatExpire: new LuaScript('chat-expire', 7, { variadic: true }),
  indexForget: new LuaScript('index-forget', 1),
  contextSwitch: new LuaScript('context-switch', 6, { variadic: true }),
  deliveryClaim: new LuaScript('delivery-claim', 2, { variadic: true }),
  deliveryAdvance: new LuaScript('delivery-advance', 2, { variadic: true }),
  deliveryPost: new LuaScript('delivery-post', 2),
  deliveryDefer: new LuaScript('delivery-defer', 1),
  deliveryRelease: new LuaScript('delivery-release', 1),
  contactSend: new LuaScript('contact-send', 3),
  contactReceive: new LuaScript('contact-receive', 4),
  memorySet: new LuaScript('memory-set', 3),
  pollerAcquire: new LuaScript('poller-acquire', 2),
  pollerRenew: new LuaScript('poller-renew', 1),
  replyWrite: new LuaScript('reply-write', 4),
  replyAppendMany: new LuaScript('reply-append-many', 2, { variadic: true }),
  replyStop: new LuaScript('reply-stop', 2),
};
