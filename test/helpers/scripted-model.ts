import type {
  LanguageModelV4CallOptions,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
} from '@ai-sdk/provider';
import { MockLanguageModelV4 } from 'ai/test';

export type Reply = { text: string } | { toolCalls: Array<{ name: string; input: unknown }> };
export type Script = (
  prompt: LanguageModelV4Prompt,
  call: number,
  options: LanguageModelV4CallOptions,
) => Promise<Reply> | Reply;

export const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** chatlane's context block at the start of a user message (request-cache.ts). */
const CONTEXT_BLOCK = /^\[sent [^\]\n]*\]\n?/;

/** A user message's text as the user wrote it: without the context block. */
export function withoutContextBlock(text: string): string {
  return text.replace(CONTEXT_BLOCK, '');
}

/** Texts of the user messages after the last assistant message (without their context blocks). */
export function newUserTexts(prompt: LanguageModelV4Prompt): string[] {
  const out: string[] = [];
  for (const m of prompt) {
    if (m.role === 'assistant') out.length = 0;
    if (m.role === 'user')
      for (const p of m.content) if (p.type === 'text') out.push(withoutContextBlock(p.text));
  }
  return out;
}

/** Like a real provider call once its abort signal fires (or already has): rejects with its reason. */
export function untilAborted(options: LanguageModelV4CallOptions): Promise<never> {
  return new Promise((_, reject) => {
    const signal = options.abortSignal;
    if (signal?.aborted) reject(signal.reason);
    signal?.addEventListener('abort', () => reject(signal.reason));
  });
}

/** Like the project's mock server: echo new user messages through chat_send, then stop. */
export const echoScript: Script = (prompt) => {
  if (prompt.at(-1)?.role === 'tool') return { text: '' };
  return { toolCalls: [{ name: 'chat_send', input: { text: `echo: ${newUserTexts(prompt).join(' | ')}` } }] };
};

function toStream(reply: Reply, call: number): LanguageModelV4StreamPart[] {
  const parts: LanguageModelV4StreamPart[] = [{ type: 'stream-start', warnings: [] }];
  if ('text' in reply) {
    if (reply.text) {
      parts.push(
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: reply.text },
        { type: 'text-end', id: 't' },
      );
    }
    parts.push({ type: 'finish', usage, finishReason: { unified: 'stop', raw: 'stop' } });
  } else {
    reply.toolCalls.forEach((tc, i) => {
      parts.push({
        type: 'tool-call',
        toolCallId: `call-${call}-${i}`,
        toolName: tc.name,
        input: JSON.stringify(tc.input),
      });
    });
    parts.push({ type: 'finish', usage, finishReason: { unified: 'tool-calls', raw: 'tool_calls' } });
  }
  return parts;
}

/** An `ai/test` mock model driven by a script; records every prompt it was given. */
export function scriptedModel(script: Script = echoScript) {
  const prompts: LanguageModelV4Prompt[] = [];
  let calls = 0;
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => {
      const call = calls++;
      prompts.push(options.prompt);
      const reply = await script(options.prompt, call, options);
      if ('text' in reply) {
        return {
          content: reply.text ? [{ type: 'text' as const, text: reply.text }] : [],
          finishReason: { unified: 'stop' as const, raw: 'stop' },
          usage,
          warnings: [],
        };
      }
      return {
        content: reply.toolCalls.map((tc, i) => ({
          type: 'tool-call' as const,
          toolCallId: `call-${call}-${i}`,
          toolName: tc.name,
          input: JSON.stringify(tc.input),
        })),
        finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' },
        usage,
        warnings: [],
      };
    },
    doStream: async (options) => {
      const call = calls++;
      prompts.push(options.prompt);
      const reply = await script(options.prompt, call, options);
      const parts = toStream(reply, call);
      return {
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            for (const p of parts) controller.enqueue(p);
            controller.close();
          },
        }),
      };
    },
  });
  return { model, prompts, calls: () => calls };
}

/** The system prompt a model call got: its system messages' texts (static part, chat part), joined. */
export function systemText(prompt: LanguageModelV4Prompt): string {
  return prompt
    .filter((m) => m.role === 'system')
    .map((m) => m.content)
    .join('\n\n');
}

/**
 * The text of every message in a prompt, role-tagged, for assertions on what the model saw;
 * the system prompt's messages (static part, chat part) are one `system` entry.
 */
export function promptTranscript(prompt: LanguageModelV4Prompt): string[] {
  return prompt.flatMap((m, i) => {
    if (m.role === 'system') return prompt[i - 1]?.role === 'system' ? [] : ['system'];
    const texts = (m.content as Array<{ type: string; text?: string; toolName?: string }>).map((p) =>
      p.type === 'text' ? withoutContextBlock(p.text ?? '') : p.type,
    );
    return [`${m.role}: ${texts.join(' ')}`];
  });
}
