import { performance } from 'node:perf_hooks';
import type { LanguageModel } from 'ai';
import type { ModelConfig } from '../../shared/config.js';
import { FallbackModel, type FallbackPolicy } from './fallback-model.js';
import { BUILT_IN_PROVIDERS, type ProviderFactories, registryOf } from './providers.js';

/** A model object of the AI SDK's current specification (what createModel returns). */
export type ModelV4 = Extract<LanguageModel, { specificationVersion: 'v4' }>;
export type GenerateResult = Awaited<ReturnType<ModelV4['doGenerate']>>;
type StreamResult = Awaited<ReturnType<ModelV4['doStream']>>;
export type StreamPart = StreamResult['stream'] extends ReadableStream<infer P> ? P : never;

/** How one model call ended, for the call metrics (model-metrics.ts). */
export interface ModelCallEnd {
  /** The configured `provider:model` that took the call. */
  model: string;
  seconds: number;
  /** What the provider reported; absent when the call failed. */
  usage?: GenerateResult['usage'];
}

/** Told the outcome of every call of each configured model (ModelHealth: which models are down). */
export interface ModelCallObserver {
  served(model: string): void;
  callFailed(model: string, err: unknown): void;
  /** Every call that ended, served or failed (not a stream its reader cancelled: a stop, a lost lane). */
  ended?(call: ModelCallEnd): void;
}

export interface ModelOptions {
  /** From loadProviders when the config names openai:, anthropic: or google:. */
  providers?: ProviderFactories;
  observer?: ModelCallObserver;
  /** Needed when the config has fallback models. */
  fallback?: FallbackPolicy;
}

/**
 * A model call's result without the request's JSON and the parsed response body. generateText
 * keeps a step's result until the next step's call has returned, so a turn in its second
 * model call held its first call's request JSON (the system prompt and tool definitions once
 * more, as many small strings) and the response as parsed; the step results drop both
 * anyway (`include` in loop.ts) and nothing else reads them. The response's
 * model id becomes the configured `provider:model`, so each step says which model served it.
 */
function asServedBy(result: GenerateResult, id: string): GenerateResult {
  delete result.request;
  if (result.response) {
    delete result.response.body;
    result.response.modelId = id;
  } else {
    result.response = { modelId: id };
  }
  return result;
}

const NO_OBSERVER: ModelCallObserver = { served: () => undefined, callFailed: () => undefined };

/**
 * The provider's model with its own doGenerate and doStream replaced, not a delegating
 * wrapper: no second object, and no frame of ours waits through the call (the promise's
 * reactions are all it adds). Each call says which configured model served it and tells the
 * observer how it ended: health per model and the call metrics, in the one pass over the
 * stream the call needs anyway.
 */
export function observedModel(
  model: ModelV4,
  id: string,
  observer: ModelCallObserver = NO_OBSERVER,
): ModelV4 {
  const generate = model.doGenerate.bind(model);
  model.doGenerate = (options) => {
    const started = performance.now();
    return observedCall(generate, options, id, observer, started).then((result) => {
      observer.served(id);
      observer.ended?.({ model: id, seconds: (performance.now() - started) / 1000, usage: result.usage });
      return asServedBy(result, id);
    });
  };
  // The turn streams: a streamed call drops its request JSON as well.
  const stream = model.doStream.bind(model);
  model.doStream = (options) => {
    const started = performance.now();
    return observedCall(stream, options, id, observer, started).then((result) => {
      delete result.request;
      result.stream = servedStream(result.stream, id, observer, started, options.abortSignal);
      return result;
    });
  };
  return model;
}

/**
 * The provider's call, its failure told to the observer (health, then the call metrics); a
 * provider that throws before it returns a promise is observed like one that rejects.
 */
function observedCall<O, R>(
  call: (options: O) => PromiseLike<R>,
  options: O,
  id: string,
  observer: ModelCallObserver,
  started: number,
): Promise<R> {
  let pending: PromiseLike<R>;
  try {
    pending = call(options);
  } catch (err) {
    pending = Promise.reject(err);
  }
  return Promise.resolve(pending).then(undefined, (err: unknown) => {
    observer.callFailed(id, err);
    observer.ended?.({ model: id, seconds: (performance.now() - started) / 1000 });
    throw err;
  });
}

/**
 * A streamed call's parts as the model sent them, but opened with the configured
 * `provider:model` as its response model id (and any id the provider names replaced by it),
 * so a streamed step says which model served it; its finish or error goes to the observer.
 *
 * A pulling ReadableStream over the provider's reader rather than a TransformStream: it runs
 * for every part of every model call, and a TransformStream costs several times more per part
 * (a writable side, a readable side and the backpressure promises between them).
 */
function servedStream(
  source: ReadableStream<StreamPart>,
  id: string,
  observer: ModelCallObserver,
  started: number,
  signal: AbortSignal | undefined,
): ReadableStream<StreamPart> {
  const reader = source.getReader();
  let usage: GenerateResult['usage'] | undefined;
  let failed = false;
  return new ReadableStream<StreamPart>(
    {
      start(controller) {
        controller.enqueue({ type: 'response-metadata', modelId: id });
      },
      pull(controller) {
        return reader.read().then(
          ({ done, value: part }) => {
            if (done) {
              controller.close();
              observer.ended?.({
                model: id,
                seconds: (performance.now() - started) / 1000,
                ...(!failed && usage && { usage }),
              });
              return;
            }
            if (part.type === 'response-metadata') {
              controller.enqueue({ ...part, modelId: id });
              return;
            }
            if (part.type === 'finish') {
              usage = part.usage;
              // Some providers finish after an error part: the call still failed.
              if (!failed) observer.served(id);
            } else if (part.type === 'error') {
              failed = true;
              observer.callFailed(id, part.error);
            }
            controller.enqueue(part);
          },
          (err: unknown) => {
            // A stream that broke (a dropped connection) failed the call; one the turn aborted
            // (a stop, a lost lane) says nothing about the model.
            if (!signal?.aborted) {
              observer.callFailed(id, err);
              observer.ended?.({ model: id, seconds: (performance.now() - started) / 1000 });
            }
            throw err;
          },
        );
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    // Pull one part when the reader asks for one, as the provider's stream is read without us.
    { highWaterMark: 0 },
  );
}

/**
 * The role's model through the AI SDK provider registry: `provider:model` for each model of
 * the config; with fallback models, a FallbackModel that tries them in order.
 */
export function createModel(config: ModelConfig, options: ModelOptions = {}): LanguageModel {
  const registry = registryOf(config, options.providers ?? BUILT_IN_PROVIDERS);
  const models = config.models.map((spec) =>
    observedModel(registry.languageModel(spec.id) as ModelV4, spec.id, options.observer),
  );
  if (models.length === 1) return models[0]!;
  if (!options.fallback)
    throw new Error('fallback models need a fallback policy (createModel options.fallback)');
  return new FallbackModel(
    models,
    config.models.map((m) => m.id),
    options.fallback,
  );
}
