import type { Metrics } from '../../shared/metrics.js';
import { classifyTurnError, errorDetail, type ModelErrorKind } from './failure.js';

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
type Failing = Extract<ModelStatus, { status: 'failing' }>;

export class ModelHealth {
  private failing: Failing | undefined;
  /**
   * Each configured model (provider:model) by its own calls, not by turns: with fallback
   * models a turn can succeed while its first model is down, and this is where that shows.
   */
  private readonly perModel = new Map<string, Failing | undefined>();

  constructor(
    private readonly metrics?: Metrics,
    models: readonly string[] = [],
  ) {
    for (const model of models) {
      this.perModel.set(model, undefined);
      metrics?.modelUp.set({ model }, 1);
    }
  }

  /** A call of `model` returned. */
  served(model: string): void {
    if (this.perModel.get(model) === undefined && this.perModel.has(model)) return;
    this.perModel.set(model, undefined);
    this.metrics?.modelUp.set({ model }, 1);
  }

  /**
   * A call of `model` failed. Only the endpoint's errors (outage, auth, unknown model) mark it
   * down; a refused message or an aborted turn says nothing about the model.
   */
  callFailed(model: string, err: unknown, now = Date.now()): void {
    const failure = classifyTurnError(err);
    if (failure.kind !== 'model') return;
    const before = this.perModel.get(model);
    this.perModel.set(model, {
      status: 'failing',
      kind: failure.errorKind,
      since: before?.since ?? new Date(now).toISOString(),
      failures: (before?.failures ?? 0) + 1,
      error: errorDetail(err),
    });
    this.metrics?.modelUp.set({ model }, 0);
  }

  /** Every configured model's state, in the order they are tried. */
  models(): Record<string, ModelStatus> {
    const out: Record<string, ModelStatus> = {};
    for (const [model, failing] of this.perModel) out[model] = failing ? { ...failing } : { status: 'ok' };
    return out;
  }

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
