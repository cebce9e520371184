import { type Config, loadConfig, type ModelConfig } from '../../src/shared/config.js';

/** The configuration of an in-process worker on a test prefix, talking to a mock model, any side port. */
export function workerConfig(prefix: string, llmUrl: string, extra: Record<string, string> = {}): Config {
  return loadConfig({
    ...process.env,
    CHATLANE_PREFIX: prefix,
    HOST: '127.0.0.1',
    METRICS_PORT: '0',
    LLM_BASE_URL: llmUrl,
    LLM_MODEL: 'mock',
    ...extra,
  });
}

/** The model configuration of the default provider (openai-compatible) at the mock model. */
export function mockModelConfig(llmUrl: string, apiKey?: string): ModelConfig {
  return {
    models: [{ id: 'openai-compatible:mock', provider: 'openai-compatible', model: 'mock' }],
    providers: { 'openai-compatible': { baseURL: llmUrl, apiKey } },
  };
}
