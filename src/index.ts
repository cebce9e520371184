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
export type { Logger } from './shared/logger.js';
export { type ChatlaneFastifyOptions, chatlaneFastify } from './start/fastify.js';
export type { Chatlane, ChatlaneOptions, ChatlaneRole, ChatlaneTurnParts } from './start/options.js';
export { startChatlane } from './start/start-chatlane.js';
