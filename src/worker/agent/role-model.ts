import type { LanguageModel } from 'ai';
import { ConfigError, type ModelConfig } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import type { PriceTable } from '../../shared/prices.js';
import { errorDetail, isOutage, isRateLimit } from './failure.js';
import { createModel, type ModelV4, observedModel } from './model.js';
import { ModelHealth } from './model-health.js';
import { modelCallMetrics } from './model-metrics.js';
import { BUILT_IN_PROVIDERS, type ProviderFactories } from './providers.js';

export interface RoleModel {
  /** The observed model (a FallbackModel over the chain when there are fallback models). */
  model: LanguageModel;
  /** Which of the role's models are down, for /readyz and chatlane_model_up. */
  health: ModelHealth;
  /**
   * A tool-loop step's deadline: LLM_TIMEOUT_MS per model of the chain, since each model call
   * has LLM_TIMEOUT_MS of its own before the next model is tried.
   */
  stepTimeoutMs: number;
}

/**
 * A role's model chain (the worker's or the compactor's): the providers' models, the
 * fallback between them, health per model and the call metrics.
 */
export function roleModel(
  models: ModelConfig,
  options: {
    metrics: Metrics;
    logger: Logger;
    timeoutMs: number;
    providers?: ProviderFactories;
    /** MODEL_PRICES_FILE's table: the call metrics' cost. */
    prices?: PriceTable;
  },
): RoleModel {
  const { metrics, logger, timeoutMs } = options;
  const ids = models.models.map((m) => m.id);
  const health = new ModelHealth(metrics, ids);
  const chain = ids.length > 1;
  const model = createModel(models, {
    providers: options.providers ?? BUILT_IN_PROVIDERS,
    // Health per model and the call metrics, told in the one pass each call makes.
    observer: {
      served: (id) => health.served(id),
      callFailed: (id, err) => health.callFailed(id, err),
      ended: modelCallMetrics(metrics, options.prices),
    },
    ...(chain && {
      fallback: {
        isOutage,
        isRateLimit,
        attemptTimeoutMs: timeoutMs,
        onFallback: (from, to, err) => {
          metrics.modelFallbacks.inc({ model: from });
          logger.warn(
            { from, to, error: errorDetail(err) },
            'model outage: the step falls back to the next model',
          );
        },
        onStreamFailed: (model, err) => health.callFailed(model, err),
      },
    }),
  });
  return {
    model,
    health,
    stepTimeoutMs: timeoutMs * ids.length,
  };
}

/**
 * A model a program gave in code (`startChatlane({ model })`) in place of LLM_MODEL: observed
 * like a configured one — health, call metrics, the step deadline — through a view of its own,
 * so the program's object is never changed and the worker and the compactor can share it.
 * Fallback models (LLM_FALLBACK_MODELS) are for configured models; a model given in code runs
 * alone. A model id string, or a model of an older specification, is refused: chatlane could
 * neither meter nor observe it.
 */
export function givenModel(
  model: LanguageModel,
  options: { metrics: Metrics; timeoutMs: number; prices?: PriceTable },
): RoleModel {
  if (typeof model === 'string' || model.specificationVersion !== 'v4') {
    throw new ConfigError(
      `model: give an AI SDK 7 model object (specification v4, e.g. openai('gpt-5')), not ${
        typeof model === 'string' ? `the id '${model}'` : `a ${model.specificationVersion} model`
      }: a model id is LLM_MODEL's job`,
    );
  }
  const { metrics } = options;
  const id = model.modelId;
  const health = new ModelHealth(metrics, [id]);
  const view: ModelV4 = {
    specificationVersion: 'v4',
    provider: model.provider,
    modelId: model.modelId,
    get supportedUrls() {
      return model.supportedUrls;
    },
    doGenerate: (callOptions) => model.doGenerate(callOptions),
    doStream: (callOptions) => model.doStream(callOptions),
  };
  return {
    model: observedModel(view, id, {
      served: (served) => health.served(served),
      callFailed: (failed, err) => health.callFailed(failed, err),
      ended: modelCallMetrics(metrics, options.prices),
    }),
    health,
    stepTimeoutMs: options.timeoutMs,
  };
}
