import { type Logger, pino } from 'pino';
import { logTraceFields } from './tracing/spans.js';

/** A pino logger: what chatlane logs to (`startChatlane({ logger })` takes one). */
export type { Logger };

/** `traced`: every line written inside a span carries its trace_id and span_id (tracing on). */
export function createLogger(level: string, name: string, traced = false): Logger {
  return pino({ level, name, base: { pid: process.pid }, ...(traced && { mixin: logTraceFields }) });
}

/** A logger that writes nothing: tests and benchmarks. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
