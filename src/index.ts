/**
 * chatlane as a library: `import { … } from 'chatlane'`. Everything a program may use is
 * exported here, and only here (package.json `exports`); the modules behind it are not part
 * of the API. Start with docs/library.md.
 *
 * Importing this module opens nothing and loads no Redis client, queue or web framework:
 * those load when `startChatlane` starts a role (after tracing, when it is on) or when
 * `chatlaneFastify` is registered.
 *
 * @packageDocumentation
 */

export { ConfigError } from './shared/config.js';
export {
  type ChatlaneEvent,
  type ChatlaneEventType,
  EVENT_TYPES,
  type EventHandler,
} from './shared/events.js';
export type { Logger } from './shared/logger.js';
export { type ChatlaneFastifyOptions, chatlaneFastify } from './start/fastify.js';
export type { Chatlane, ChatlaneOptions, ChatlaneRole, ChatlaneTurnParts } from './start/options.js';
export { startChatlane } from './start/start-chatlane.js';
export type { OnceFunction } from './worker/agent/tools/once.js';
export { type ChatlaneToolContext, chatlaneToolContextSchema } from './worker/agent/tools/tool-context.js';
export * from './worker/pipeline/public.js';
