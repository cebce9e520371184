import { tracingChannel } from 'node:diagnostics_channel';
import { AI_SDK_TELEMETRY_TRACING_CHANNEL, tool } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { silentLogger } from '../../src/shared/logger.js';
import { runLoop } from '../../src/worker/agent/loop.js';
import { TurnAbort } from '../../src/worker/agent/turn-abort.js';
import { scriptedModel } from '../helpers/scripted-model.js';

/** Everything the AI SDK publishes on its telemetry tracing channel while a subscriber listens. */
function listen() {
  const channel = tracingChannel(AI_SDK_TELEMETRY_TRACING_CHANNEL);
  const seen: string[] = [];
  const handlers = {
    start: (message: unknown) => seen.push((message as { type?: string }).type ?? '?'),
    end: () => undefined,
    asyncStart: () => undefined,
    asyncEnd: () => undefined,
    error: () => undefined,
  };
  channel.subscribe(handlers);
  return { seen, stop: () => channel.unsubscribe(handlers) };
}

let stop: (() => void) | undefined;
afterEach(() => stop?.());

describe('the tool loop with tracing off', () => {
  it('has the AI SDK build no telemetry event for the turn, its steps or its tool calls', async () => {
    const listener = listen();
    stop = listener.stop;
    const { model } = scriptedModel((_prompt, call) =>
      call === 0 ? { toolCalls: [{ name: 'note', input: { n: 1 } }] } : { text: 'done' },
    );
    const result = await runLoop<string>({
      model,
      system: 's',
      messages: [{ role: 'user', content: 'hi' }],
      tools: {
        note: tool({ inputSchema: z.object({ n: z.number() }), execute: async () => ({ ok: true }) }),
      },
      maxSteps: 4,
      maxMerges: 0,
      abort: new TurnAbort(),
      responseId: 'r',
      logger: silentLogger(),
      nextArrivals: async () => [],
      toModel: async (items) => items.map((text) => ({ role: 'user' as const, content: text })),
    });

    expect(result.steps).toBe(2);
    // The channel has a listener, so a default (unset) telemetry setting would publish the
    // turn, each step, each model call and the tool call on it.
    expect(listener.seen).toEqual([]);
  });
});
