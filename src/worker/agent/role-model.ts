import type { LanguageModel } from 'ai';
import type { ModelConfig } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import type { PriceTable } from '../../shared/prices.js';
import { errorDetail, isOutage, isRateLimit } from './failure.js';
import { createModel } from './model.js';
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
