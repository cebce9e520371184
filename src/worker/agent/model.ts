import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModel } from 'ai';
import type { ModelConfig } from '../../shared/config.js';

/** Any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, LiteLLM, our mock). */
export function createModel(config: ModelConfig): LanguageModel {
  const provider = createOpenAICompatible({
    name: 'llm',
    baseURL: config.baseURL,
    ...(config.apiKey ? { apiKey: config.apiKey } : {}),
    includeUsage: true,
  });
  return provider.chatModel(config.model);
}
