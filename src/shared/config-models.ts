import { z } from 'zod';

/**
 * `provider:model` (LLM_MODEL, COMPACTION_MODEL, LLM_FALLBACK_MODELS): how a name reads, which
 * variables each provider needs, and the chain of models a role calls. config.ts turns the
 * problems found here into a ConfigError.
 */

/** The AI SDK providers `provider:model` may name (the provider registry's ids). */
export const PROVIDERS = ['openai', 'anthropic', 'google', 'openai-compatible'] as const;
export type ProviderName = (typeof PROVIDERS)[number];

/** A model as configured: `id` is `provider:model`, the prefix always written out. */
export interface ModelSpec {
  id: `${ProviderName}:${string}`;
  provider: ProviderName;
  model: string;
}

/** A provider's endpoint and key, read in config.ts and handed to its AI SDK package. */
export interface ProviderSettings {
  baseURL: string;
  apiKey: string | undefined;
}

export interface ModelConfig {
  /** The models in the order a call tries them: the role's model, then LLM_FALLBACK_MODELS. */
  models: ModelSpec[];
  /** Settings of exactly the providers `models` name. */
  providers: Partial<Record<ProviderName, ProviderSettings>>;
}

/**
 * `provider:model` by the first colon when the prefix is a known provider; anything else is an
 * openai-compatible model id as a whole (Ollama's `llama3:8b` stays one id, as before).
 */
export function parseModelId(value: string): ModelSpec {
  const at = value.indexOf(':');
  const prefix = at === -1 ? '' : value.slice(0, at);
  const provider = (PROVIDERS as readonly string[]).includes(prefix) ? (prefix as ProviderName) : undefined;
  const model = provider ? value.slice(at + 1) : value;
  const name = provider ?? 'openai-compatible';
  return { id: `${name}:${model}`, provider: name, model };
}

export function modelIdProblem(value: string): string | undefined {
  return parseModelId(value).model.trim() === ''
    ? `no model after the provider (provider:model, provider one of ${PROVIDERS.join(', ')})`
    : undefined;
}

/** Comma-separated `provider:model` names, without repeats; unset = none. */
export const modelList = z
  .string()
  .optional()
  .transform((v, ctx): string[] => {
    const ids = (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    for (const id of ids) {
      const problem = modelIdProblem(id);
      if (problem) ctx.addIssue({ code: 'custom', message: `'${id}': ${problem}` });
    }
    if (new Set(ids.map((id) => parseModelId(id).id)).size !== ids.length)
      ctx.addIssue({ code: 'custom', message: 'lists a model twice' });
    return ids;
  });

interface ProviderVariables {
  key: string;
  url: string;
  defaultURL: string | undefined;
  /** openai-compatible: the endpoint is what must be set, the key is optional. */
  required: 'key' | 'url';
}

/** The variables each AI SDK provider package documents (LLM_* for openai-compatible, ours). */
const PROVIDER_VARIABLES: Record<ProviderName, ProviderVariables> = {
  openai: {
    key: 'OPENAI_API_KEY',
    url: 'OPENAI_BASE_URL',
    defaultURL: 'https://api.openai.com/v1',
    required: 'key',
  },
  anthropic: {
    key: 'ANTHROPIC_API_KEY',
    url: 'ANTHROPIC_BASE_URL',
    defaultURL: 'https://api.anthropic.com/v1',
    required: 'key',
  },
  google: {
    key: 'GOOGLE_GENERATIVE_AI_API_KEY',
    url: 'GOOGLE_GENERATIVE_AI_BASE_URL',
    defaultURL: 'https://generativelanguage.googleapis.com/v1beta',
    required: 'key',
  },
  'openai-compatible': { key: 'LLM_API_KEY', url: 'LLM_BASE_URL', defaultURL: undefined, required: 'url' },
};

function stringOf(vars: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const value = vars[key];
  return typeof value === 'string' ? value : undefined;
}

/**
 * A role's chain: its model (`first`, named by `variable`), then the fallbacks, each with its
 * provider's settings. Every model needs its provider's key (or, for openai-compatible,
 * LLM_BASE_URL): each one missing is a problem naming the variable.
 */
export function modelChain(
  vars: Readonly<Record<string, unknown>>,
  first: { variable: string; value: string },
  fallbacks: readonly string[],
): { config: ModelConfig; problems: string[] } {
  const named = [
    { variable: first.variable, id: first.value },
    ...fallbacks.map((id) => ({ variable: 'LLM_FALLBACK_MODELS', id })),
  ];
  const models: ModelSpec[] = [];
  const providers: ModelConfig['providers'] = {};
  const problems: string[] = [];
  for (const { variable, id } of named) {
    const spec = parseModelId(id);
    const problem = modelIdProblem(id);
    if (problem) {
      problems.push(`  ${variable}: '${id}': ${problem}`);
      continue;
    }
    if (models.some((m) => m.id === spec.id)) continue;
    models.push(spec);
    const needs = PROVIDER_VARIABLES[spec.provider];
    const apiKey = stringOf(vars, needs.key);
    const baseURL = stringOf(vars, needs.url) ?? needs.defaultURL;
    const missing =
      needs.required === 'key' ? (apiKey ? undefined : needs.key) : baseURL ? undefined : needs.url;
    if (missing) {
      if (!problems.some((p) => p.startsWith(`  ${missing}:`))) {
        problems.push(
          `  ${missing}: missing: ${variable} '${id}' uses the ${spec.provider} provider, which needs it`,
        );
      }
      continue;
    }
    providers[spec.provider] = { baseURL: baseURL!, apiKey };
  }
  return { config: { models, providers }, problems };
}
