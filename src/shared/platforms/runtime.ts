import { createIoRedisState } from '@chat-adapter/state-ioredis';
import { type Adapter, Chat, type StateAdapter } from 'chat';
import { chatSdkPrefix } from '../keys.js';
import type { Logger } from '../logger.js';
import type { RedisClient } from '../redis.js';
import { chatSdkLogger } from './log.js';
import type { EnabledPlatform } from './platform.js';
import { scopedState } from './scope.js';

/**
 * One Chat SDK instance per process over the enabled platforms' adapters: the ingress
 * receives through it, the delivery side posts through it.
 *
 * - `concurrency: "concurrent"`: the SDK takes no thread lock; chatlane's own lane protocol
 *   (one turn per chat, fenced) orders the work.
 * - State: `@chat-adapter/state-ioredis` on chatlane's own Redis connection (Cluster
 *   included) under `<CHATLANE_PREFIX>:chat-sdk`, wrapped so a webhook request's dedup claims
 *   are known to it (./scope.ts).
 * - Thread history persistence is off: chatlane keeps each chat's history itself.
 */
export interface PlatformRuntime {
  chat: Chat;
  state: StateAdapter;
  platforms: ReadonlyMap<string, EnabledPlatform>;
  adapter(name: string): Adapter;
  /** Drop what an adapter caches in process memory about a thread (see `forgetThread`). */
  forget(name: string, threadId: string): void;
  close(): Promise<void>;
}

export async function createPlatformRuntime(opts: {
  platforms: readonly EnabledPlatform[];
  redis: RedisClient;
  prefix: string;
  logger: Logger;
}): Promise<PlatformRuntime> {
  const adapters: Record<string, Adapter> = {};
  const byName = new Map<string, EnabledPlatform>();
  for (const platform of opts.platforms) {
    const adapter = await platform.module.createAdapter(platform.settings, opts.logger);
    // chatlane stores history itself; the SDK's copy in Redis would be a second one.
    Object.assign(adapter, { persistThreadHistory: false, persistMessageHistory: false });
    adapters[platform.module.name] = adapter;
    byName.set(platform.module.name, platform);
  }
  const state = scopedState(
    createIoRedisState({
      client: opts.redis,
      keyPrefix: chatSdkPrefix(opts.prefix),
      logger: chatSdkLogger(opts.logger.child({ sdk: 'state' })),
    }),
  );
  const chat = new Chat({
    userName: 'chatlane',
    adapters,
    state,
    concurrency: 'concurrent',
    logger: chatSdkLogger(opts.logger.child({ sdk: 'chat' })),
  });
  return {
    chat,
    state,
    platforms: byName,
    adapter(name) {
      const adapter = adapters[name];
      if (!adapter) throw new Error(`platform '${name}' is not enabled`);
      return adapter;
    },
    forget: (name, threadId) => forgetThread(adapters[name], threadId),
    // The state adapter does not own chatlane's connection: closing it leaves Redis open.
    close: () => chat.shutdown(),
  };
}

/** A runtime for `config`'s platforms, initialized (adapters know their bot identity). */
export async function startPlatformRuntime(
  config: { PLATFORMS: readonly EnabledPlatform[]; CHATLANE_PREFIX: string },
  redis: RedisClient,
  logger: Logger,
): Promise<PlatformRuntime> {
  const runtime = await createPlatformRuntime({
    platforms: config.PLATFORMS,
    redis,
    prefix: config.CHATLANE_PREFIX,
    logger,
  });
  await runtime.chat.initialize();
  return runtime;
}

/**
 * Some adapters (Telegram's) keep every message they saw or sent in a per-thread cache in
 * process memory, without a bound: across thousands of chats that is a leak. chatlane never
 * reads it, so the thread's entry is dropped once a message has been handled or posted.
 */
function forgetThread(adapter: Adapter | undefined, threadId: string): void {
  const cache = (adapter as { messageCache?: unknown } | undefined)?.messageCache;
  if (cache instanceof Map) cache.delete(threadId);
}
