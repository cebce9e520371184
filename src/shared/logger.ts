import { type Logger, pino } from 'pino';

export type { Logger };

export function createLogger(level: string, name: string): Logger {
  return pino({ level, name, base: { pid: process.pid } });
}

/** A logger that writes nothing: tests and benchmarks. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
