import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModel } from 'ai';
import type { ModelConfig } from '../../shared/config.js';

/** A model object of the AI SDK's current specification (what createModel returns). */
export type ModelV4 = Extract<LanguageModel, { specificationVersion: 'v4' }>;
export type GenerateResult = Awaited<ReturnType<ModelV4['doGenerate']>>;

/**
 * A model call's result without the request's JSON and the parsed response body. generateText
 * keeps a step's result until the next step's call has returned, so a turn in its second
 * model call held its first call's request JSON (the system prompt and tool definitions once
 * more, as many small strings) and the response as parsed; the step results drop both
 * anyway (`include` in loop.ts) and nothing else reads them.
 */
function withoutBodies(result: GenerateResult): GenerateResult {
  delete result.request;
  if (result.response) delete result.response.body;
  return result;
}

/** Any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, LiteLLM, our mock). */
export function createModel(config: ModelConfig): LanguageModel {
  const provider = createOpenAICompatible({
    name: 'llm',
    baseURL: config.baseURL,
    ...(config.apiKey ? { apiKey: config.apiKey } : {}),
    includeUsage: true,
  });
  const model = provider.chatModel(config.model);
  // Its own doGenerate with the bodies dropped, not a delegating wrapper: no second object,
  // and no frame of ours waits through the call (the promise's reaction is all it adds).
  const generate = model.doGenerate.bind(model);
  model.doGenerate = (options) => generate(options).then(withoutBodies);
  // A streamed call's request JSON is kept by its result the same way (the turn streams).
  const stream = model.doStream.bind(model);
  model.doStream = (options) =>
    stream(options).then((result) => {
      delete result.request;
      return result;
    });
  return model;
}
