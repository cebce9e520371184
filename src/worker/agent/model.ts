import type { LanguageModel } from 'ai';
import type { ModelConfig } from '../../shared/config.js';
import { FallbackModel, type FallbackPolicy } from './fallback-model.js';
import { BUILT_IN_PROVIDERS, type ProviderFactories, registryOf } from './providers.js';

/** A model object of the AI SDK's current specification (what createModel returns). */
export type ModelV4 = Extract<LanguageModel, { specificationVersion: 'v4' }>;
export type GenerateResult = Awaited<ReturnType<ModelV4['doGenerate']>>;
type StreamResult = Awaited<ReturnType<ModelV4['doStream']>>;
export type StreamPart = StreamResult['stream'] extends ReadableStream<infer P> ? P : never;

/** Told the outcome of every call of each configured model (ModelHealth: which models are down). */
export interface ModelCallObserver {
  served(model: string): void;
  callFailed(model: string, err: unknown): void;
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

/**
 * The provider's model with its own doGenerate replaced, not a delegating wrapper: no second
 * object, and no frame of ours waits through the call (the promise's reactions are all it adds).
 */
function served(model: ModelV4, id: string, observer: ModelCallObserver | undefined): ModelV4 {
  const generate = model.doGenerate.bind(model);
  // The reactions are built once per model, not per call.
  const ok = observer
    ? (result: GenerateResult) => {
        observer.served(id);
        return asServedBy(result, id);
      }
    : (result: GenerateResult) => asServedBy(result, id);
  const failed = observer
    ? (err: unknown) => {
        observer.callFailed(id, err);
        throw err;
      }
    : undefined;
  model.doGenerate = (options) => generate(options).then(ok, failed);
  // The turn streams: a streamed call drops its request JSON as well, and says which model
  // served it and how it ended as the generated one does.
  const stream = model.doStream.bind(model);
  model.doStream = (options) =>
    stream(options).then((result) => {
      delete result.request;
      result.stream = result.stream.pipeThrough(servedStream(id, observer));
      return result;
    }, failed);
  return model;
}

/**
 * A streamed call's parts as the model sent them, but opened with the configured
 * `provider:model` as its response model id (and any id the provider names replaced by it),
 * so a streamed step says which model served it; its end or error goes to the observer.
 */
function servedStream(id: string, observer: ModelCallObserver | undefined) {
  return new TransformStream<StreamPart, StreamPart>({
    start(controller) {
      controller.enqueue({ type: 'response-metadata', modelId: id });
    },
    transform(part, controller) {
      if (part.type === 'response-metadata') controller.enqueue({ ...part, modelId: id });
      else {
        if (part.type === 'finish') observer?.served(id);
        else if (part.type === 'error') observer?.callFailed(id, part.error);
        controller.enqueue(part);
      }
    },
  });
}

/**
 * The role's model through the AI SDK provider registry: `provider:model` for each model of
 * the config; with fallback models, a FallbackModel that tries them in order.
 */
export function createModel(config: ModelConfig, options: ModelOptions = {}): LanguageModel {
  const registry = registryOf(config, options.providers ?? BUILT_IN_PROVIDERS);
  const models = config.models.map((spec) =>
    served(registry.languageModel(spec.id) as ModelV4, spec.id, options.observer),
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
