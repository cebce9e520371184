import type { LanguageModel } from 'ai';
import { type Metrics, recordModelCall } from '../../shared/metrics.js';
import type { PriceTable } from '../../shared/prices.js';
import { callUsage } from '../../shared/usage.js';
import { type ModelCallEnd, observedModel } from './model.js';

/**
 * The model call metrics: every model call is observed as it ends (model.ts `observedModel`
 * tells `modelCallMetrics`: latency and the usage the provider reported; a streamed call when
 * its stream ends).
 */

/** The call metrics as a model observer's `ended`: latency by result, tokens and (with `prices`) cost. */
export function modelCallMetrics(metrics: Metrics, prices?: PriceTable): (call: ModelCallEnd) => void {
  return (call) =>
    recordModelCall(
      metrics,
      {
        seconds: call.seconds,
        ok: call.usage !== undefined,
        ...(call.usage && { usage: usageOfCall(call.model, call.usage) }),
      },
      prices,
    );
}

type ModelUsage = NonNullable<ModelCallEnd['usage']>;

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
 * One model with the call metrics only (no health, its own model id): for a model built
 * outside `roleModel`. A model id string is returned as is.
 */
export function meteredModel(model: LanguageModel, metrics: Metrics, prices?: PriceTable): LanguageModel {
  if (typeof model === 'string' || model.specificationVersion !== 'v4') return model;
  return observedModel(model, model.modelId, {
    served: () => undefined,
    callFailed: () => undefined,
    ended: modelCallMetrics(metrics, prices),
  });
}
