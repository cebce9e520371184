import type { LanguageModelV3Prompt, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { MockLanguageModelV3 } from 'ai/test';

/**
 * A zero-latency in-process model (the idea of test/helpers/scripted-model.ts, without the
 * prompt log a benchmark would only grow): step 1 echoes the new user messages through
 * `chat_send`, step 2 (after the tool result) stops with no text.
 */

export const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

export function newUserTexts(prompt: LanguageModelV3Prompt): string[] {
  const out: string[] = [];
  for (const m of prompt) {
    if (m.role === 'assistant') out.length = 0;
    if (m.role === 'user') for (const p of m.content) if (p.type === 'text') out.push(p.text);
  }
  return out;
}

function reply(prompt: LanguageModelV3Prompt, call: number): LanguageModelV3StreamPart[] {
  const parts: LanguageModelV3StreamPart[] = [{ type: 'stream-start', warnings: [] }];
  if (prompt.at(-1)?.role === 'tool') {
    parts.push({ type: 'finish', usage, finishReason: { unified: 'stop', raw: 'stop' } });
    return parts;
  }
  parts.push(
    {
      type: 'tool-call',
      toolCallId: `call-${call}`,
      toolName: 'chat_send',
      input: JSON.stringify({ text: `echo: ${newUserTexts(prompt).join(' | ')}` }),
    },
    { type: 'finish', usage, finishReason: { unified: 'tool-calls', raw: 'tool_calls' } },
  );
  return parts;
}

export function echoModel(): { model: MockLanguageModelV3; calls: () => number } {
  let calls = 0;
  const model: MockLanguageModelV3 = new MockLanguageModelV3({
    // The turn loop calls doGenerate; doStream stays for anything that streams.
    doGenerate: async (options) => {
      model.doGenerateCalls.length = 0;
      const call = calls++;
      const content =
        options.prompt.at(-1)?.role === 'tool'
          ? []
          : [
              {
                type: 'tool-call' as const,
                toolCallId: `call-${call}`,
                toolName: 'chat_send',
                input: JSON.stringify({ text: `echo: ${newUserTexts(options.prompt).join(' | ')}` }),
              },
            ];
      return {
        content,
        finishReason:
          content.length > 0
            ? { unified: 'tool-calls' as const, raw: 'tool_calls' }
            : { unified: 'stop' as const, raw: 'stop' },
        usage,
        warnings: [],
      };
    },
    doStream: async (options) => {
      // The mock keeps every call's options; thousands of turns would make that a leak we measure.
      model.doStreamCalls.length = 0;
      const parts = reply(options.prompt, calls++);
      return {
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          start(controller) {
            for (const p of parts) controller.enqueue(p);
            controller.close();
          },
        }),
      };
    },
  });
  return { model, calls: () => calls };
}
