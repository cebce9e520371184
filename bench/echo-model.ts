import type { LanguageModelV4Prompt } from '@ai-sdk/provider';
import { MockLanguageModelV4 } from 'ai/test';
import { newUserTexts, usage } from '../test/helpers/scripted-model.js';
import { sleep } from './util.js';

/**
 * An in-process model (the idea of test/helpers/scripted-model.ts, without the prompt log a
 * benchmark would only grow): step 1 echoes the new user messages through `chat_send`,
 * step 2 (after the tool result) stops with no text. Zero latency unless asked for.
 */

// The same fixed usage and prompt reading as the tests' scripted model.
export { newUserTexts, usage } from '../test/helpers/scripted-model.js';

export interface EchoModelOptions {
  /** Fixed latency per call. */
  latencyMs?: number;
  /** Sees the prompt of every turn's first step. */
  onFirstStep?: (prompt: LanguageModelV4Prompt) => void;
}

/** The turn loop calls doGenerate (generateText); nothing in chatlane streams the model. */
export function echoModel(opts: EchoModelOptions = {}): { model: MockLanguageModelV4; calls: () => number } {
  let calls = 0;
  const model: MockLanguageModelV4 = new MockLanguageModelV4({
    doGenerate: async (options) => {
      // The mock keeps every call's options; thousands of turns would make that a leak we measure.
      model.doGenerateCalls.length = 0;
      const call = calls++;
      const first = options.prompt.at(-1)?.role !== 'tool';
      if (first) opts.onFirstStep?.(options.prompt);
      if (opts.latencyMs) await sleep(opts.latencyMs);
      const content = first
        ? [
            {
              type: 'tool-call' as const,
              toolCallId: `call-${call}`,
              toolName: 'chat_send',
              input: JSON.stringify({ text: `echo: ${newUserTexts(options.prompt).join(' | ')}` }),
            },
          ]
        : [];
      return {
        content,
        finishReason: first
          ? { unified: 'tool-calls' as const, raw: 'tool_calls' }
          : { unified: 'stop' as const, raw: 'stop' },
        usage,
        warnings: [],
      };
    },
  });
  return { model, calls: () => calls };
}
