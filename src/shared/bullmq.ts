/**
 * BullMQ for every chatlane process, without its package index: `import 'bullmq'` also loads
 * the PostgreSQL backend (about 0.8 MB of heap per process: its SQL text and code), which
 * chatlane never uses, and its classes index loads what chatlane does not use either (flows,
 * queue events, the relay and its backend, the Valkey GLIDE client: ~0.2 MB of code). These
 * are the same modules the index re-exports (one instance: code that imports 'bullmq' gets
 * these classes), declared with the index's types in ./bullmq-paths.d.ts.
 * Import BullMQ values from here; types may come from 'bullmq' itself. cron-parser, which
 * BullMQ requires at load, is loaded only when a cron pattern is used (./cron-parser-on-demand.ts,
 * imported first so that it runs before BullMQ's modules).
 */
import './cron-parser-on-demand.js';

export { DelayedError, UnrecoverableError } from 'bullmq/dist/cjs/classes/errors/index.js';
export { Queue } from 'bullmq/dist/cjs/classes/queue.js';
export { Worker } from 'bullmq/dist/cjs/classes/worker.js';
export { MetricsTime } from 'bullmq/dist/cjs/enums/index.js';
