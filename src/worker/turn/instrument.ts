import { performance } from 'node:perf_hooks';
import type { Job } from 'bullmq';
import { DelayedError } from '../../shared/bullmq.js';
import type { Metrics, TurnOutcomeLabel } from '../../shared/metrics.js';

/**
 * The turn processor's metrics, kept outside the turn code: the BullMQ processor is timed
 * (duration by outcome, queue wait). The model calls' own metrics are agent/model-metrics.ts.
 */

/** What a processor's result or error says about the turn. */
function outcomeOf(result: unknown, error: unknown): TurnOutcomeLabel {
  if (error !== undefined) {
    if (error instanceof DelayedError) return error.name === 'ModelWaitError' ? 'deferred' : 'busy';
    return 'failed';
  }
  const status = (result as { status?: unknown } | undefined)?.status;
  if (status === 'failed') return 'failed';
  if (status === 'held') return 'held';
  return status === 'done' || status === 'idle' || status === 'lost' || status === 'busy' ? status : 'done';
}

/** A turn's duration by outcome, and a fence rejection for a `lost` one. */
function observeTurn(metrics: Metrics, started: number, result: unknown, error: unknown): void {
  const outcome = outcomeOf(result, error);
  metrics.turnDuration.observe({ outcome }, (performance.now() - started) / 1000);
  if (outcome === 'lost') metrics.fenceRejections.inc();
}

/**
 * Wraps a turn processor: turn duration by outcome, queue wait (job.timestamp → first
 * job.processedOn; later starts after a retry or delay are not queue wait), and a fence
 * rejection for every `lost` turn (its commit, outbox write or lease renewal was fenced out).
 */
export function instrumentTurnProcessor<J extends Job, R>(
  processor: (job: J, token?: string) => Promise<R>,
  metrics: Metrics,
  queue: string,
): (job: J, token?: string) => Promise<R> {
  // Not an async function (see MeteredModel.doGenerate): the processor's promise with the
  // observation chained to it, so no frame of this wrapper waits through the turn.
  return (job, token) => {
    const started = performance.now();
    if (job.attemptsStarted <= 1) {
      const wait = (job.processedOn ?? Date.now()) - job.timestamp;
      metrics.queueWait.observe({ queue }, Math.max(0, wait) / 1000);
    }
    let run: Promise<R>;
    try {
      run = processor(job, token);
    } catch (err) {
      run = Promise.reject(err);
    }
    return run.then(
      (result) => {
        observeTurn(metrics, started, result, undefined);
        return result;
      },
      (err: unknown) => {
        observeTurn(metrics, started, undefined, err ?? new Error('processor failed'));
        throw err;
      },
    );
  };
}
