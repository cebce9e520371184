import { customProvider } from 'ai';
import type { MockLanguageModelV4 } from 'ai/test';
import type { ModelConfig } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { createMetrics } from '../../src/shared/metrics.js';
import { roleModel } from '../../src/worker/agent/role-model.js';

/**
 * A role's model chain as a process builds it (roleModel: the observed models, the fallback
 * between them, ModelHealth, the call metrics), over `ai/test` models as the providers' models:
 * `openai-compatible:<modelId>` for each, tried in the order given.
 */
export function mockChain(mocks: MockLanguageModelV4[], timeoutMs = 0) {
  const config: ModelConfig = {
    models: mocks.map((m) => ({
      id: `openai-compatible:${m.modelId}` as const,
      provider: 'openai-compatible' as const,
      model: m.modelId,
    })),
    providers: { 'openai-compatible': { baseURL: 'http://model.invalid/v1', apiKey: undefined } },
  };
  const languageModels = Object.fromEntries(mocks.map((m) => [m.modelId, m]));
  const metrics = createMetrics({ defaultMetrics: false });
  const role = roleModel(config, {
    metrics,
    logger: silentLogger(),
    timeoutMs,
    providers: { 'openai-compatible': () => customProvider({ languageModels }) },
  });
  return { ...role, metrics, ids: config.models.map((m) => m.id) };
}
