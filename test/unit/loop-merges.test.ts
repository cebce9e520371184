import { type ModelMessage, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { silentLogger } from '../../src/shared/logger.js';
import { type LoopControl, runLoop } from '../../src/worker/agent/loop.js';
import { TurnAbort } from '../../src/worker/agent/turn-abort.js';
import { promptTranscript, type Reply, scriptedModel } from '../helpers/scripted-model.js';

const user = (text: string): ModelMessage => ({ role: 'user', content: text });

/** Three tool steps, then a closing text: four model calls, three chances to merge. */
const replies: Reply[] = [
  { toolCalls: [{ name: 'note', input: { n: 0 } }] },
  { toolCalls: [{ name: 'note', input: { n: 1 } }] },
  { toolCalls: [{ name: 'note', input: { n: 2 } }] },
  { text: 'done' },
];

function loopWith(opts: { arrivals: string[][]; control?: LoopControl; onNote?: (n: number) => void }) {
  const { model, prompts } = scriptedModel((_prompt, call) => replies[call] ?? { text: 'done' });
  const responsesSeen: number[] = [];
  let step = 0;
  const run = runLoop<string>({
    model,
    system: 's',
    messages: [user('history'), user('first')],
    tools: {
      note: tool({
        inputSchema: z.object({ n: z.number() }),
        execute: async ({ n }) => {
          opts.onNote?.(n);
          return { ok: n };
        },
      }),
    },
    maxSteps: 8,
    maxMerges: 10,
    abort: new TurnAbort(),
    responseId: 'r',
    logger: silentLogger(),
    nextArrivals: async (_max, responses) => {
      responsesSeen.push(responses.length);
      return opts.arrivals[step++] ?? [];
    },
    toModel: async (items) => items.map(user),
    ...(opts.control ? { control: opts.control } : {}),
  });
  return { run, prompts, responsesSeen };
}

describe('the tool loop with lane merges (AI SDK 7 carries prepareStep messages forward)', () => {
  it('adds each merge once, where it arrived, so every step’s request extends the one before', async () => {
    const { run, prompts, responsesSeen } = loopWith({ arrivals: [['m1'], [], ['m2', 'm3']] });
    const result = await run;

    expect(result.steps).toBe(4);
    expect(result.merges).toEqual([
      { stepNumber: 1, items: ['m1'] },
      { stepNumber: 3, items: ['m2', 'm3'] },
    ]);
    const transcripts = prompts.map(promptTranscript);
    for (let i = 1; i < transcripts.length; i++) {
      expect(transcripts[i]!.slice(0, transcripts[i - 1]!.length)).toEqual(transcripts[i - 1]);
    }
    expect(transcripts.at(-1)).toEqual([
      'system',
      'user: history',
      'user: first',
      'assistant: tool-call',
      'tool: tool-result',
      'user: m1',
      'assistant: tool-call',
      'tool: tool-result',
      'assistant: tool-call',
      'tool: tool-result',
      'user: m2',
      'user: m3',
    ]);
    // The merge room is told the turn's own step responses (an assistant and a tool message a
    // step), never the merged messages themselves.
    expect(responsesSeen).toEqual([2, 4, 6]);
  });

  it('replaces only the turn’s input on a rebase, keeping its responses and merges after it', async () => {
    const control: LoopControl = {};
    const { run, prompts } = loopWith({
      arrivals: [['m1']],
      control,
      onNote: (n) => {
        if (n === 1) control.rebase = [user('new context')];
      },
    });
    await run;

    const transcripts = prompts.map(promptTranscript);
    expect(transcripts[2]).toEqual([
      'system',
      'user: new context',
      'assistant: tool-call',
      'tool: tool-result',
      'user: m1',
      'assistant: tool-call',
      'tool: tool-result',
    ]);
    // Later steps keep the rebased head: it is not replaced back by the input the turn began with.
    expect(transcripts[3]!.slice(0, transcripts[2]!.length)).toEqual(transcripts[2]);
  });
});

describe('the tool loop and the sandbox session', () => {
  it('hands the turn’s sandbox session to every tool as experimental_sandbox', async () => {
    const sandbox = { description: 'a sandbox' } as unknown as NonNullable<
      Parameters<typeof runLoop>[0]['sandbox']
    >;
    const seen: unknown[] = [];
    const { model } = scriptedModel((_prompt, call) =>
      call === 0 ? { toolCalls: [{ name: 'probe', input: {} }] } : { text: 'done' },
    );
    await runLoop<string>({
      model,
      system: 's',
      messages: [user('go')],
      tools: {
        probe: tool({
          inputSchema: z.object({}),
          execute: async (_input, options) => {
            seen.push(options.experimental_sandbox);
            return 'ok';
          },
        }),
      },
      maxSteps: 4,
      maxMerges: 0,
      abort: new TurnAbort(),
      responseId: 'r',
      logger: silentLogger(),
      nextArrivals: async () => [],
      toModel: async (items) => items.map(user),
      sandbox,
    });
    expect(seen).toEqual([sandbox]);
  });
});
