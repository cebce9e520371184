import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { MockLanguageModelV4 } from 'ai/test';
import { usage } from './scripted-model.js';

/** One chat_send the model writes, its input streamed in `pieces` deltas `gapMs` apart. */
export interface StreamedSend {
  text: string;
  pieces?: number;
  /** After this many pieces the model goes quiet for `pauseMs` (a writer that stalls). */
  pauseAfter?: number;
  pauseMs?: number;
}

export interface StreamingScript {
  /** Plain assistant text streamed first (never sent to anyone). */
  thinking?: string;
  sends: StreamedSend[];
  gapMs: number;
  /** The next step's sends (after the tool results); none: the turn ends there. */
  next?: StreamingScript;
}

const finished = (reason: 'stop' | 'tool-calls'): LanguageModelV4StreamPart => ({
  type: 'finish',
  usage,
  finishReason: { unified: reason, raw: reason },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * An `ai/test` mock model that writes its chat_send calls the way a provider streams tool
 * input (tool-input-start, JSON deltas over time, tool-input-end, tool-call), so a turn's reply
 * stream grows while the model writes. `script(turn)` says what each turn writes: its first
 * step, then each `next` after the tool results; after the last one the turn ends.
 */
export function streamingSendModel(script: (turn: number) => StreamingScript) {
  let turns = 0;
  let step: StreamingScript | undefined;
  let calls = 0;
  return new MockLanguageModelV4({
    // A turn nobody watches (generateText): the same answer at once, after the time it takes to write.
    doGenerate: async (options) => {
      step = options.prompt.at(-1)?.role === 'tool' ? step?.next : script(turns++);
      const turn = turns - 1;
      if (!step) return { content: [], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
      const { thinking, sends, gapMs } = step;
      const pieces = sends.reduce((n, s) => n + (s.pieces ?? 6), 0) + (thinking?.split(/(?<= )/).length ?? 0);
      await sleep(gapMs * pieces);
      return {
        content: [
          ...(thinking ? [{ type: 'text' as const, text: thinking }] : []),
          ...sends.map((send) => ({
            type: 'tool-call' as const,
            toolCallId: `call-${turn}-${calls++}`,
            toolName: 'chat_send',
            input: JSON.stringify({ text: send.text }),
          })),
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool-calls' },
        usage,
        warnings: [],
      };
    },
    doStream: async (options) => {
      step = options.prompt.at(-1)?.role === 'tool' ? step?.next : script(turns++);
      const turn = turns - 1;
      if (!step) {
        return {
          stream: new ReadableStream<LanguageModelV4StreamPart>({
            start(controller) {
              controller.enqueue(finished('stop'));
              controller.close();
            },
          }),
        };
      }
      const { thinking, sends, gapMs } = step;
      async function* parts(): AsyncGenerator<LanguageModelV4StreamPart> {
        yield { type: 'stream-start', warnings: [] };
        if (thinking) {
          yield { type: 'text-start', id: `t${turn}` };
          for (const word of thinking.split(/(?<= )/)) {
            await sleep(gapMs);
            yield { type: 'text-delta', id: `t${turn}`, delta: word };
          }
          yield { type: 'text-end', id: `t${turn}` };
        }
        for (const send of sends) {
          const id = `call-${turn}-${calls++}`;
          yield { type: 'tool-input-start', id, toolName: 'chat_send' };
          yield { type: 'tool-input-delta', id, delta: '{"text":"' };
          const n = send.pieces ?? 6;
          // The input is JSON: the text goes in escaped, cut anywhere (an escape too, as providers do).
          const escaped = JSON.stringify(send.text).slice(1, -1);
          const size = Math.ceil(escaped.length / n);
          for (let p = 0; p < n; p++) {
            if (p === send.pauseAfter) await sleep(send.pauseMs ?? 0);
            await sleep(gapMs);
            const piece = escaped.slice(p * size, (p + 1) * size);
            if (piece) yield { type: 'tool-input-delta', id, delta: piece };
          }
          yield { type: 'tool-input-delta', id, delta: '"}' };
          yield { type: 'tool-input-end', id };
          yield {
            type: 'tool-call',
            toolCallId: id,
            toolName: 'chat_send',
            input: JSON.stringify({ text: send.text }),
          };
        }
        yield finished('tool-calls');
      }
      const it = parts();
      return {
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          async pull(controller) {
            const next = await it.next();
            if (next.done) controller.close();
            else controller.enqueue(next.value);
          },
        }),
      };
    },
  });
}
