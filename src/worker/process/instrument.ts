import { performance } from 'node:perf_hooks';
import type { LanguageModel } from 'ai';
import type { Job } from 'bullmq';
import { DelayedError } from '../../shared/bullmq.js';
import { type Metrics, recordModelCall, type TurnOutcomeLabel } from '../../shared/metrics.js';
import type { PriceTable } from '../../shared/prices.js';
import { callUsage } from '../../shared/usage.js';
import type { GenerateResult, ModelV4, StreamPart } from '../agent/model.js';

/**
 * Worker-side metrics, kept outside the turn code: the model is wrapped (one observation per
 * model call = per tool-loop step, with the usage the provider reported) and the BullMQ
 * processor in a timer (duration by outcome, queue wait). Turns stream (doStream: metered
 * until the stream has ended, with the usage of its finish part); compaction generates.
 */

/**
 * The model with call latency and token counters. A class of its own rather than an AI SDK
 * middleware (wrapLanguageModel): a wrapped call runs four async functions and two closures
 * more, and every one of them is held for the whole model call (a second at 2,000 turns in
 * flight), so it outlives the young generation.
 */
class MeteredModel implements ModelV4 {
  readonly specificationVersion = 'v4';

  constructor(
    private readonly model: ModelV4,
    private readonly metrics: Metrics,
    private readonly prices: PriceTable | undefined,
  ) {}

  get provider(): string {
    return this.model.provider;
  }

  get modelId(): string {
    return this.model.modelId;
  }

  get supportedUrls(): ModelV4['supportedUrls'] {
    return this.model.supportedUrls;
  }

  /**
   * Not an async function: the provider's promise with the metering chained to it. A
   * suspended frame here (its generator, registers and await closures) would be held for the
   * whole model call, a second at 2,000 turns in flight.
   */
  doGenerate(options: Parameters<ModelV4['doGenerate']>[0]): Promise<GenerateResult> {
    const started = performance.now();
    const { metrics, prices } = this;
    let call: ReturnType<ModelV4['doGenerate']>;
    try {
      call = this.model.doGenerate(options);
    } catch (err) {
      // A provider that throws before it returns a promise is metered like one that rejects.
      call = Promise.reject(err);
    }
    return Promise.resolve(call).then(
      (result) => {
        recordModelCall(
          metrics,
          {
            seconds: (performance.now() - started) / 1000,
            ok: true,
            // The model that answered: a provider may name the exact version it served.
            usage: usageOfCall(result.response?.modelId || this.model.modelId, result.usage),
          },
          prices,
        );
        return result;
      },
      (err: unknown) => {
        recordModelCall(metrics, { seconds: (performance.now() - started) / 1000, ok: false });
        throw err;
      },
    );
  }

  /** Metered from the call to the end of its stream; an aborted stream (a stop, a lost lane) is not observed. */
  doStream(options: Parameters<ModelV4['doStream']>[0]): ReturnType<ModelV4['doStream']> {
    const started = performance.now();
    const { metrics, prices } = this;
    let modelId = this.model.modelId;
    let call: ReturnType<ModelV4['doStream']>;
    try {
      call = this.model.doStream(options);
    } catch (err) {
      call = Promise.reject(err);
    }
    return Promise.resolve(call).then(
      (result) => {
        let usage: ModelUsage | undefined;
        let failed = false;
        const stream = result.stream.pipeThrough(
          new TransformStream<StreamPart, StreamPart>({
            transform(part, controller) {
              if (part.type === 'finish') usage = part.usage;
              else if (part.type === 'error') failed = true;
              else if (part.type === 'response-metadata' && part.modelId) modelId = part.modelId;
              controller.enqueue(part);
            },
            flush() {
              recordModelCall(
                metrics,
                {
                  seconds: (performance.now() - started) / 1000,
                  ok: !failed && usage !== undefined,
                  ...(usage && { usage: usageOfCall(modelId, usage) }),
                },
                prices,
              );
            },
          }),
        );
        return { ...result, stream };
      },
      (err: unknown) => {
        recordModelCall(metrics, { seconds: (performance.now() - started) / 1000, ok: false });
        throw err;
      },
    );
  }
}

type ModelUsage = GenerateResult['usage'];

/** One call's usage as the metrics count it, by the model that answered. */
function usageOfCall(modelId: string, usage: ModelUsage) {
  const { inputTokens, outputTokens } = usage;
  return callUsage(modelId, {
    inputTokens: inputTokens.total,
    outputTokens: outputTokens.total,
    inputTokenDetails: { cacheReadTokens: inputTokens.cacheRead, cacheWriteTokens: inputTokens.cacheWrite },
    outputTokenDetails: { reasoningTokens: outputTokens.reasoning },
  });
}

/**
 * The model with call latency, token and (with `prices`) cost counters; a model id string is
 * returned as is.
 */
export function meteredModel(model: LanguageModel, metrics: Metrics, prices?: PriceTable): LanguageModel {
  if (typeof model === 'string' || model.specificationVersion !== 'v4') return model;
  return new MeteredModel(model, metrics, prices);
}

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
