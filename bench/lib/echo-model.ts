import type { LanguageModelV4Prompt, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';
import { newUserTexts, usage } from '../../test/helpers/scripted-model.js';
import { sleep } from './util.js';

/**
 * An in-process model (the idea of test/helpers/scripted-model.ts, without the prompt log a
 * benchmark would only grow): step 1 echoes the new user messages through `chat_send`,
 * step 2 (after the tool result) stops with no text. Zero latency unless asked for.
 */

// The same fixed usage and prompt reading as the tests' scripted model.
export { newUserTexts, usage } from '../../test/helpers/scripted-model.js';

export interface EchoModelOptions {
  /** Fixed latency per call. */
  latencyMs?: number;
  /** Sees the prompt of every turn's first step. */
  onFirstStep?: (prompt: LanguageModelV4Prompt) => void;
}

/** The answer to one call: step 1 echoes through chat_send, a call after the tool result stops. */
function answer(prompt: LanguageModelV4Prompt, call: number) {
  const first = prompt.at(-1)?.role !== 'tool';
  const input = first ? JSON.stringify({ text: `echo: ${newUserTexts(prompt).join(' | ')}` }) : undefined;
  return {
    first,
    input,
    toolCallId: `call-${call}`,
    finishReason: first
      ? { unified: 'tool-calls' as const, raw: 'tool_calls' }
      : { unified: 'stop' as const, raw: 'stop' },
  };
}

/**
 * Turns stream (streamText: doStream), as a provider does: the chat_send input arrives in
 * 16-character deltas like the mock model server's; compaction generates (doGenerate).
 */
export function echoModel(opts: EchoModelOptions = {}): { model: MockLanguageModelV4; calls: () => number } {
  let calls = 0;
  const begin = async (prompt: LanguageModelV4Prompt) => {
    const a = answer(prompt, calls++);
    if (a.first) opts.onFirstStep?.(prompt);
    if (opts.latencyMs) await sleep(opts.latencyMs);
    return a;
  };
  const model: MockLanguageModelV4 = new MockLanguageModelV4({
    doGenerate: async (options) => {
      // The mock keeps every call's options; thousands of turns would make that a leak we measure.
      model.doGenerateCalls.length = 0;
      const a = await begin(options.prompt);
      const content = a.input
        ? [{ type: 'tool-call' as const, toolCallId: a.toolCallId, toolName: 'chat_send', input: a.input }]
        : [];
      return { content, finishReason: a.finishReason, usage, warnings: [] };
    },
    doStream: async (options) => {
      model.doStreamCalls.length = 0;
      const a = await begin(options.prompt);
      const parts: LanguageModelV4StreamPart[] = [{ type: 'stream-start', warnings: [] }];
      if (a.input) {
        parts.push({ type: 'tool-input-start', id: a.toolCallId, toolName: 'chat_send' });
        for (let i = 0; i < a.input.length; i += 16) {
          parts.push({ type: 'tool-input-delta', id: a.toolCallId, delta: a.input.slice(i, i + 16) });
        }
        parts.push(
          { type: 'tool-input-end', id: a.toolCallId },
          { type: 'tool-call', toolCallId: a.toolCallId, toolName: 'chat_send', input: a.input },
        );
      }
      parts.push({ type: 'finish', finishReason: a.finishReason, usage });
      return { stream: convertArrayToReadableStream(parts) };
    },
  });
  return { model, calls: () => calls };
}
