import type { Job, Queue } from 'bullmq';
import { DelayedError, MetricsTime, UnrecoverableError, Worker } from '../../shared/bullmq.js';
import { ModelUnavailableError } from '../../shared/errors.js';
import { enqueueTurn, QUEUES, queueOptions, type TurnJob, turnJobSchema } from '../../shared/jobs.js';
import { bullmqLockRenewTime } from '../../shared/liveness.js';
import type { Metrics } from '../../shared/metrics.js';
import type { RedisClient } from '../../shared/redis.js';
import { modelRetryDelay } from '../agent/model-health.js';
import { instrumentTurnProcessor } from './instrument.js';
import { runTurn, type TurnDeps, type TurnOutcome } from './turn.js';

export interface TurnWorkerOptions {
  prefix: string;
  connection: RedisClient;
  concurrency: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  turns: Queue<TurnJob>;
  onOutcome?: (outcome: TurnOutcome, job: Job<TurnJob>) => void;
  /** Turn duration by outcome, queue wait and fence rejections go here when given. */
  metrics?: Metrics;
  /** MODEL_RETRY_BACKOFF_MS / _MAX_MS: how long a chat waits after a model error. */
  modelBackoff?: { baseMs: number; maxMs: number };
}

/** Attempts of a turn job when the job does not say (enqueueTurn always does). */
const DEFAULT_ATTEMPTS = 1;

/**
 * The model endpoint failed (ModelUnavailableError): the job was moved to delayed without
 * spending an attempt. A DelayedError for BullMQ; its own class so metrics tell it from a
 * busy chat.
 */
export class ModelWaitError extends DelayedError {}

/** Small jitter so workers that met on a busy lease do not meet again. */
const jitter = () => Math.floor(Math.random() * 100);

/**
 * The BullMQ side of turns: one job = one turn attempt for one chat. A chat with messages
 * left after its turn is re-added, so it queues behind every other waiting chat (fairness).
 */
export function createTurnWorker(deps: TurnDeps, opts: TurnWorkerOptions): Worker<TurnJob> {
  /**
   * The job once its turn has settled: a model failure delays the job, a busy chat comes back
   * later, one with messages left is re-added. `turn` is settled, so awaiting it only reads
   * its outcome or rethrows its error.
   */
  const afterTurn = async (
    job: Job<TurnJob>,
    token: string | undefined,
    chatKey: string,
    turn: Promise<TurnOutcome>,
  ): Promise<TurnOutcome> => {
    let outcome: TurnOutcome;
    try {
      outcome = await turn;
    } catch (err) {
      if (!(err instanceof ModelUnavailableError)) throw err;
      // Back off per start of this job (exponential, capped), without spending an attempt:
      // however long the model is down, its messages are neither dropped nor failed.
      const { baseMs, maxMs } = opts.modelBackoff ?? { baseMs: 2000, maxMs: 60_000 };
      const delay = modelRetryDelay(job.attemptsStarted, baseMs, maxMs);
      deps.logger.warn(
        { jobId: job.id, chatKey, kind: err.kind, retryInMs: delay, err: err.cause },
        'model unavailable; turn delayed',
      );
      await job.moveToDelayed(Date.now() + delay, token);
      throw new ModelWaitError();
    }

    if (outcome.status === 'busy') {
      // Another turn (possibly a stalled one whose lease has not run out) holds the chat:
      // come back when its lease ends, keeping this job (and its dedup slot).
      await job.moveToDelayed(Date.now() + outcome.retryInMs + jitter(), token);
      throw new DelayedError();
    }
    if (outcome.status !== 'lost' && outcome.pending > 0) await enqueueTurn(opts.turns, chatKey);
    opts.onOutcome?.(outcome, job);
    return outcome;
  };

  // Not an async function: what follows the turn starts once it has settled, so no frame of
  // the processor waits through the turn's model calls (at thousands of turns in flight each
  // would hold its registers, its await closures and the job).
  const processor = (job: Job<TurnJob>, token?: string): Promise<TurnOutcome> => {
    const parsed = turnJobSchema.safeParse(job.data);
    if (!parsed.success) {
      return Promise.reject(new UnrecoverableError(`bad turn job data: ${parsed.error.issues[0]?.message}`));
    }
    const { chatKey } = parsed.data;
    // The last attempt fails the batch rather than throw, so a message that keeps failing
    // the turn cannot block its chat: attempts count only failures that were not the model's.
    const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? DEFAULT_ATTEMPTS);
    const turn = runTurn(deps, chatKey, { finalAttempt, jobId: job.id });
    const settle = () => afterTurn(job, token, chatKey, turn);
    return turn.then(settle, settle);
  };

  const run = opts.metrics ? instrumentTurnProcessor(processor, opts.metrics, QUEUES.turns) : processor;
  const worker = new Worker<TurnJob>(QUEUES.turns, run, {
    ...queueOptions(opts.prefix, QUEUES.turns, opts.connection),
    concurrency: opts.concurrency,
    lockDuration: opts.lockDurationMs,
    lockRenewTime: bullmqLockRenewTime(opts.lockDurationMs),
    stalledInterval: opts.stalledIntervalMs,
    maxStalledCount: 3,
    // BullMQ's per-minute completed/failed counts: bullmq_job_*_total on /metrics, Bull Board's graphs.
    metrics: { maxDataPoints: MetricsTime.ONE_WEEK },
    autorun: false,
  });
  worker.on('failed', (job, err) => {
    deps.logger.warn({ jobId: job?.id, chatKey: job?.data?.chatKey, err }, 'turn failed');
  });
  worker.on('error', (err) => deps.logger.error({ err }, 'turn worker error'));
  return worker;
}
