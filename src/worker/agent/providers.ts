import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createProviderRegistry } from 'ai';
import type { ModelConfig, ProviderName, ProviderSettings } from '../../shared/config.js';

type Providers = Parameters<typeof createProviderRegistry>[0];
type Provider = Providers[string];

/** Builds one AI SDK provider from the settings config.ts read (nothing here reads the environment). */
export type ProviderFactory = (settings: ProviderSettings) => Provider;
export type ProviderFactories = Partial<Record<ProviderName, ProviderFactory>>;

/** Any OpenAI-compatible endpoint (vLLM, Ollama, LiteLLM, OpenRouter, DeepSeek, our mock). */
const openAICompatible: ProviderFactory = ({ baseURL, apiKey }) =>
  createOpenAICompatible({ name: 'llm', baseURL, ...(apiKey ? { apiKey } : {}), includeUsage: true });

/** What is at hand without importing a provider package: the default provider. */
export const BUILT_IN_PROVIDERS: ProviderFactories = { 'openai-compatible': openAICompatible };

/**
 * The factories of the providers the configs name, importing only their packages: each of
 * @ai-sdk/openai, /anthropic and /google adds about 1 MB of heap to a process that loads it.
 * The base URL is always passed: left out, a package would read its own environment variable.
 */
export async function loadProviders(...configs: ModelConfig[]): Promise<ProviderFactories> {
  const out: ProviderFactories = { ...BUILT_IN_PROVIDERS };
  const named = (name: ProviderName) => configs.some((c) => c.providers[name] !== undefined);
  if (named('openai')) {
    const { createOpenAI } = await import('@ai-sdk/openai');
    out.openai = ({ baseURL, apiKey }) => createOpenAI({ baseURL, apiKey });
  }
  if (named('anthropic')) {
    const { createAnthropic } = await import('@ai-sdk/anthropic');
    out.anthropic = ({ baseURL, apiKey }) => createAnthropic({ baseURL, apiKey });
  }
  if (named('google')) {
    const { createGoogle } = await import('@ai-sdk/google');
    out.google = ({ baseURL, apiKey }) => createGoogle({ baseURL, apiKey });
  }
  return out;
}

/** The AI SDK provider registry over the configured providers: `registry.languageModel('provider:model')`. */
export function registryOf(config: ModelConfig, factories: ProviderFactories) {
  const providers: Providers = {};
  for (const [name, settings] of Object.entries(config.providers) as [ProviderName, ProviderSettings][]) {
    const factory = factories[name];
    // A programming error, not the operator's: the caller skipped loadProviders.
    if (!factory) throw new Error(`the ${name} provider was not loaded (see loadProviders)`);
    providers[name] = factory(settings);
  }
  return createProviderRegistry(providers);
}
