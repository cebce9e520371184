import type { Metrics } from '../../shared/metrics.js';
import type { ModelErrorKind } from './failure.js';

export type ModelStatus =
  | { status: 'ok' }
  | {
      status: 'failing';
      /** Kind of the latest error (auth, not_found, rate_limit, server, network, timeout). */
      kind: ModelErrorKind;
      /** When the current run of failures began (ISO time). */
      since: string;
      /** Turns that failed on the model since its last success. */
      failures: number;
      error: string;
    };

/**
 * This worker's view of its model endpoint, for `/readyz` detail and the
 * `chatlane_model_errors_total{kind}` counter. A failing model does not make the worker
 * unready: it is healthy and every other worker shares the same endpoint, so an orchestrator
 * restarting it (or a balancer draining it) would only add churn. Operators alert on the
 * counter; the readiness detail says which endpoint problem a worker sees.
 */
export class ModelHealth {
  private failing: Extract<ModelStatus, { status: 'failing' }> | undefined;

  constructor(private readonly metrics?: Metrics) {}

  failed(kind: ModelErrorKind, error: string, now = Date.now()): void {
    this.metrics?.modelErrors.inc({ kind });
    this.failing = {
      status: 'failing',
      kind,
      since: this.failing?.since ?? new Date(now).toISOString(),
      failures: (this.failing?.failures ?? 0) + 1,
      error,
    };
  }

  succeeded(): void {
    this.failing = undefined;
  }

  status(): ModelStatus {
    return this.failing ? { ...this.failing } : { status: 'ok' };
  }
}

/** Delay before a turn retries after a model error: doubles per start of the job, ±20 % jitter, capped. */
export function modelRetryDelay(
  attempt: number,
  baseMs: number,
  maxMs: number,
  random = Math.random,
): number {
  const exponent = Math.min(Math.max(0, attempt - 1), 30);
  const delay = Math.min(maxMs, baseMs * 2 ** exponent);
  return Math.max(1, Math.round(delay * (0.8 + 0.4 * random())));
}
