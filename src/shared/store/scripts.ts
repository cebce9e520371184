import { createHash } from 'node:crypto';
import type { EventSink, WrittenEvent } from '../events.js';
import { type RedisClient, refreshSlotsOnRedirect } from '../redis.js';
import { LUA_SOURCES } from './lua-sources.js';

export type { RedisClient };

/** A script's text and its SHA1, as EVALSHA names it. */
interface ScriptText {
  source: string;
  sha: string;
}

const sha1 = (source: string) => createHash('sha1').update(source).digest('hex');

/**
 * One Lua script file (./lua, compiled into ./lua-sources.ts at build time with its includes:
 * nothing is read from disk when chatlane loads). Runs by EVALSHA and falls back to EVAL once
 * when the server has not seen it (restart, failover, new Cluster node).
 *
 * Each script comes in two variants. The plain one declares `__events` false. The collecting
 * one (for a process that hands events to code: `run` with an event sink) declares it a
 * table, runs the script's body as a function and answers `{ events, reply }`: every event
 * the script appended (includes/events.lua) comes back with the reply, so no read follows.
 * Both put their declaration on the first line, so Lua's line numbers stay the file's.
 */
export class LuaScript<Events extends boolean = false> {
  readonly source: string;
  readonly sha: string;
  private collectingText: ScriptText | undefined;

  /** variadic: `numberOfKeys` named keys, then any number more (listed in the script header). */
  readonly variadic: boolean;
  /**
   * The script records events: every call then names where they go (an event sink, or
   * `undefined` for none), so no store can forget a program's onEvent. Checked against the
   * Lua by test/unit/lua-events.test.ts.
   */
  readonly writesEvents: Events;

  constructor(
    readonly name: string,
    readonly numberOfKeys: number,
    opts: { variadic?: boolean; events?: Events } = {},
  ) {
    this.variadic = opts.variadic ?? false;
    this.writesEvents = (opts.events ?? false) as Events;
    const body = LUA_SOURCES[name];
    if (body === undefined) {
      throw new Error(
        `${name}.lua is not in lua-sources.ts: run node scripts/lua-modules.mjs (npm run build does)`,
      );
    }
    this.source = `local __events = false; ${body}`;
    this.sha = sha1(this.source);
  }

  /** The collecting variant, built on first use (only processes with an event sink use it). */
  private get collecting(): ScriptText {
    if (!this.collectingText) {
      const body = this.source.slice('local __events = false; '.length);
      const source = `local __events = {}; local __reply = (function() ${body}\nend)()\nreturn { __events, __reply }`;
      this.collectingText = { source, sha: sha1(source) };
    }
    return this.collectingText;
  }

  /**
   * Runs the script. With `events`, the collecting variant runs and the sink gets the events
   * the script appended, in order, before the reply is returned.
   */
  async run(
    redis: RedisClient,
    keys: string[],
    args: Array<string | number | Buffer>,
    ...sink: Events extends true ? [events: EventSink | undefined] : []
  ): Promise<unknown> {
    const events: EventSink | undefined = sink[0];
    if (this.variadic ? keys.length < this.numberOfKeys : keys.length !== this.numberOfKeys) {
      const takes = `${this.variadic ? 'at least ' : ''}${this.numberOfKeys}`;
      throw new Error(`${this.name}.lua takes ${takes} keys, got ${keys.length}`);
    }
    if (events) return this.runCollecting(redis, keys, args, events);
    try {
      return await (redis.evalsha as Script).call(redis, this.sha, keys.length, keys, args);
    } catch (err) {
      return this.fallback(redis, this, keys, args, err);
    }
  }

  private async runCollecting(
    redis: RedisClient,
    keys: string[],
    args: Array<string | number | Buffer>,
    events: EventSink,
  ): Promise<unknown> {
    const text = this.collecting;
    let answer: unknown;
    try {
      answer = await (redis.evalsha as Script).call(redis, text.sha, keys.length, keys, args);
    } catch (err) {
      answer = await this.fallback(redis, text, keys, args, err);
    }
    const [written, reply] = answer as [WrittenEvent[], unknown?];
    if (written.length > 0) events(written);
    return reply ?? null;
  }

  /** A server that has not seen the script (restart, failover, new Cluster node) gets its source once. */
  private fallback(
    redis: RedisClient,
    text: ScriptText,
    keys: string[],
    args: Array<string | number | Buffer>,
    err: unknown,
  ): Promise<unknown> {
    if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
      return (redis.eval as Script).call(redis, text.source, keys.length, keys, args);
    }
    refreshSlotsOnRedirect(redis, err);
    throw err;
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
  args: Array<string | number | Buffer>,
) => Promise<unknown>;

export const scripts = {
  ingest: new LuaScript('ingest', 5),
  acquire: new LuaScript('acquire', 9, { events: true }),
  renew: new LuaScript('renew', 2, { events: true }),
  renewMany: new LuaScript('renew-many', 2, { variadic: true, events: true }),
  commit: new LuaScript('commit', 11, { events: true }),
  fail: new LuaScript('fail', 7, { events: true }),
  budgetHold: new LuaScript('budget-hold', 7, { events: true }),
  outbox: new LuaScript('outbox', 6, { events: true }),
  finish: new LuaScript('finish', 5, { events: true }),
  sweepCheck: new LuaScript('sweep-check', 4),
  compact: new LuaScript('compact', 5, { events: true }),
  archiveRead: new LuaScript('archive-read', 2),
  chatExpire: new LuaScript('chat-expire', 7, { variadic: true }),
  indexForget: new LuaScript('index-forget', 1),
  contextSwitch: new LuaScript('context-switch', 6, { variadic: true, events: true }),
  deliveryClaim: new LuaScript('delivery-claim', 2, { variadic: true }),
  deliveryAdvance: new LuaScript('delivery-advance', 4, { variadic: true, events: true }),
  deliveryPart: new LuaScript('delivery-part', 1),
  deliveryPost: new LuaScript('delivery-post', 2),
  deliveryDefer: new LuaScript('delivery-defer', 1),
  deliveryRelease: new LuaScript('delivery-release', 1),
  contactSend: new LuaScript('contact-send', 3, { events: true }),
  contactReceive: new LuaScript('contact-receive', 4, { events: true }),
  memorySet: new LuaScript('memory-set', 3, { events: true }),
  once: new LuaScript('once', 4, { events: true }),
  pollerAcquire: new LuaScript('poller-acquire', 2),
  pollerRenew: new LuaScript('poller-renew', 1),
  replyWrite: new LuaScript('reply-write', 4, { events: true }),
  replyAppendMany: new LuaScript('reply-append-many', 2, { variadic: true }),
  replyStop: new LuaScript('reply-stop', 2, { events: true }),
  uiWatch: new LuaScript('ui-watch', 2),
  webhookClaim: new LuaScript('webhook-claim', 1),
  webhookRelease: new LuaScript('webhook-release', 1),
  workspaceSave: new LuaScript('workspace-save', 3, { events: true }),
  approvalAnswer: new LuaScript('approval-answer', 3),
};
