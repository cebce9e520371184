import type { LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { type ModelMessage, type TextStreamPart, type ToolSet, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { silentLogger } from '../../src/shared/logger.js';
import { runLoop } from '../../src/worker/agent/loop.js';
import { StepInterrupt } from '../../src/worker/agent/step-interrupt.js';
import { TurnAbort } from '../../src/worker/agent/turn-abort.js';
import { promptTranscript, usage } from '../helpers/scripted-model.js';

const user = (text: string): ModelMessage => ({ role: 'user', content: text });

type Step =
  /** Streams `partial`, then hangs until its call is aborted (a slow model mid-answer). */
  { hang: string } | { text: string } | { tool: string; input: unknown };

/** A streaming mock model playing `script` one call after another; records every prompt. */
function model(script: Step[], onStarted?: (call: number) => void) {
  const prompts: LanguageModelV4CallOptions['prompt'][] = [];
  let calls = 0;
  const mock = new MockLanguageModelV4({
    doStream: async (options) => {
      const call = calls++;
      prompts.push(options.prompt);
      const step = script[call] ?? { text: '' };
      const signal = options.abortSignal;
      return {
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            controller.enqueue({ type: 'stream-start', warnings: [] });
            if ('hang' in step) {
              controller.enqueue({ type: 'text-start', id: `t${call}` });
              controller.enqueue({ type: 'text-delta', id: `t${call}`, delta: step.hang });
              // Told only once the partial answer is out: the step is mid-answer.
              setTimeout(() => onStarted?.(call), 10);
              const fail = () => controller.error(signal?.reason ?? new Error('aborted'));
              if (signal?.aborted) fail();
              signal?.addEventListener('abort', fail);
              return;
            }
            if ('text' in step) {
              if (step.text) {
                controller.enqueue({ type: 'text-start', id: `t${call}` });
                controller.enqueue({ type: 'text-delta', id: `t${call}`, delta: step.text });
                controller.enqueue({ type: 'text-end', id: `t${call}` });
              }
              controller.enqueue({ type: 'finish', usage, finishReason: { unified: 'stop', raw: 'stop' } });
            } else {
              controller.enqueue({
                type: 'tool-call',
                toolCallId: `c${call}`,
                toolName: step.tool,
                input: JSON.stringify(step.input),
              });
              controller.enqueue({
                type: 'finish',
                usage,
                finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
              });
            }
            controller.close();
          },
        }),
      };
    },
  });
  return { mock, prompts, calls: () => calls };
}

interface Run {
  arrivals: string[][];
  script: Step[];
  /** Called when a hanging call has shown its partial answer. */
  onStarted?: (call: number, interrupt: StepInterrupt) => void;
  tools?: ToolSet;
  maxMerges?: number;
}

function run(opts: Run) {
  const interrupt = new StepInterrupt();
  const { mock, prompts } = model(opts.script, (call) => opts.onStarted?.(call, interrupt));
  const fresh: boolean[] = [];
  const parts: string[] = [];
  const events: string[] = [];
  let read = 0;
  const result = runLoop<string>({
    model: mock,
    system: 's',
    messages: [user('history'), user('first')],
    tools: opts.tools ?? {},
    maxSteps: 8,
    maxMerges: opts.maxMerges ?? 10,
    abort: new TurnAbort(),
    responseId: 'r',
    logger: silentLogger(),
    interrupt,
    nextArrivals: async (_max, _responses, isFresh) => {
      fresh.push(isFresh === true);
      return opts.arrivals[read++] ?? [];
    },
    toModel: async (items) => items.map(user),
    onPart: (part: TextStreamPart<ToolSet>) => parts.push(part.type),
    onMerge: (items) => events.push(`merge ${items.join(',')}`),
    onInterrupt: (items, step) => events.push(`interrupt ${step} ${items.join(',')}`),
  });
  return { result, prompts, interrupt, fresh, parts, events };
}

describe('the tool loop with LANE_POLICY=interrupt', () => {
  it('aborts a model call mid-answer and runs that step again with the new message folded in', async () => {
    const sent: string[] = [];
    const { result, prompts, interrupt, fresh, events } = run({
      arrivals: [['second']],
      script: [{ hang: 'Hi! How can I' }, { tool: 'say', input: { text: 'both' } }, { text: '' }],
      tools: {
        say: tool({
          inputSchema: z.object({ text: z.string() }),
          execute: async ({ text }) => {
            sent.push(text);
            return { ok: true };
          },
        }),
      },
      onStarted: (_call, i) => expect(i.raise()).toBe(true),
    });
    const loop = await result;

    expect(interrupt.count).toBe(1);
    // The aborted call is not a step: two steps, the first being the restarted one.
    expect(loop.steps).toBe(2);
    expect(loop.merges).toEqual([{ stepNumber: 0, items: ['second'] }]);
    expect(promptTranscript(prompts[0]!)).toEqual(['system', 'user: history', 'user: first']);
    expect(promptTranscript(prompts[1]!)).toEqual(['system', 'user: history', 'user: first', 'user: second']);
    // The restart read the inbox then and there (no earlier look stood in for it).
    expect(fresh[0]).toBe(true);
    expect(events).toEqual(['interrupt 0 second', 'merge second']);
    // What the aborted call had generated is gone: only the restarted step's work is kept.
    expect(sent).toEqual(['both']);
    expect(JSON.stringify(loop.response.parts)).not.toContain('Hi! How can I');
  });

  it('cannot interrupt a step whose tools have started: the message is merged at its end', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let interrupt!: StepInterrupt;
    const calls: string[] = [];
    const {
      result,
      prompts,
      events,
      interrupt: i,
    } = run({
      arrivals: [['later']],
      script: [{ tool: 'slow', input: {} }, { text: 'done' }],
      tools: {
        slow: tool({
          inputSchema: z.object({}),
          execute: async () => {
            calls.push('slow');
            // A message arrives while the tool runs: the step is past its model call.
            expect(interrupt.raise()).toBe(false);
            release();
            return { ok: true };
          },
        }),
      },
    });
    interrupt = i;
    const loop = await result;
    await held;
    expect(i.count).toBe(0);
    expect(calls).toEqual(['slow']);
    expect(loop.merges).toEqual([{ stepNumber: 1, items: ['later'] }]);
    expect(events).toEqual(['merge later']);
    expect(promptTranscript(prompts[1]!).at(-1)).toBe('user: later');
  });

  it('restarts the same step again for a second interrupt, keeping the steps that had finished', async () => {
    let raised = 0;
    const { result, prompts, interrupt } = run({
      arrivals: [[], ['m2'], ['m3']],
      script: [{ tool: 'noop', input: {} }, { hang: 'Let me' }, { hang: 'So' }, { text: 'answer' }],
      tools: { noop: tool({ inputSchema: z.object({}), execute: async () => ({ ok: true }) }) },
      onStarted: (_call, i) => {
        raised += 1;
        expect(i.raise()).toBe(true);
      },
    });
    const loop = await result;
    expect(raised).toBe(2);
    expect(interrupt.count).toBe(2);
    expect(loop.steps).toBe(2);
    expect(loop.merges).toEqual([
      { stepNumber: 1, items: ['m2'] },
      { stepNumber: 1, items: ['m3'] },
    ]);
    expect(loop.finalText).toBe('answer');
    expect(promptTranscript(prompts[3]!)).toEqual([
      'system',
      'user: history',
      'user: first',
      'assistant: tool-call',
      'tool: tool-result',
      'user: m2',
      'user: m3',
    ]);
  });

  it('a raise with nothing under way does nothing', () => {
    const interrupt = new StepInterrupt();
    expect(interrupt.raise()).toBe(false);
    interrupt.signalFor(new AbortController().signal);
    expect(interrupt.raise()).toBe(false);
    interrupt.modelCallStarts();
    interrupt.settled();
    expect(interrupt.raise()).toBe(false);
    expect(interrupt.count).toBe(0);
  });
});
