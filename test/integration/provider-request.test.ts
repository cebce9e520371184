import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import type { LanguageModel } from 'ai';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { runTurn } from '../../src/worker/turn/turn.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { ingestTexts, turnDeps } from '../helpers/turn-deps.js';

/**
 * The prompt-cache hints as the real provider packages put them on the wire
 * (docs/prompt-caching.md): real turns (real Redis, `runTurn`) whose model is the AI SDK's
 * Anthropic or OpenAI provider with a fetch that records each request body and answers as
 * the provider would.
 */

const redis = testRedis();
let prefix: string;

beforeEach(() => {
  prefix = randomPrefix('preq');
});
afterAll(async () => {
  await deleteLabel(redis, 'preq');
  redis.disconnect();
});

/**
 * A fetch that records every JSON body and answers `reply`, or `events` as Server-Sent Events
 * when the request asks for a stream (turns stream their model calls).
 */
function recordingFetch(reply: object, events?: Array<[string, object]>) {
  const bodies: Array<Record<string, unknown>> = [];
  const fetch = async (_url: Parameters<typeof globalThis.fetch>[0], init?: RequestInit) => {
    const body = JSON.parse(String(init?.body)) as Record<string, unknown>;
    bodies.push(body);
    if (body.stream === true && events) {
      const sse = events
        .map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
        .join('');
      return new Response(sse, { status: 200, headers: { 'content-type': 'text/event-stream' } });
    }
    return new Response(JSON.stringify(reply), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    });
  };
  return { bodies, fetch: fetch as typeof globalThis.fetch };
}

/** Two turns of chat c1 (the second has history): every request body the model got. */
async function twoTurns(model: LanguageModel) {
  const deps = turnDeps(redis, prefix, model);
  for (const text of ['hello', 'and again']) {
    await ingestTexts(deps.store, 'c1', text);
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done' });
  }
}

const EPHEMERAL = { type: 'ephemeral' };

/** The same answer as Anthropic's Messages API streams it. */
const ANTHROPIC_STREAM: Array<[string, object]> = [
  [
    'message_start',
    {
      type: 'message_start',
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 10, output_tokens: 1 },
      },
    },
  ],
  [
    'content_block_start',
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  ],
  [
    'content_block_delta',
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'fine, thanks' } },
  ],
  ['content_block_stop', { type: 'content_block_stop', index: 0 }],
  [
    'message_delta',
    {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: 3 },
    },
  ],
  ['message_stop', { type: 'message_stop' }],
];

type Block = { type: string; text?: string; cache_control?: unknown };
type AnthropicMessage = { role: string; content: Block[] };

describe('the prompt-cache hints on the wire', () => {
  it("Anthropic: cache_control on the static system block, on the history's last block and on the input's last block", async () => {
    const { bodies, fetch } = recordingFetch(
      {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [{ type: 'text', text: 'fine, thanks' }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: 10, output_tokens: 3 },
      },
      ANTHROPIC_STREAM,
    );
    await twoTurns(createAnthropic({ apiKey: 'test', fetch })('claude-test'));
    expect(bodies).toHaveLength(2);
    for (const body of bodies) {
      const system = body.system as Block[];
      expect(system).toHaveLength(2);
      expect(system[0]).toMatchObject({ type: 'text', cache_control: EPHEMERAL });
      expect(system[0]!.text).not.toContain('ChatKey');
      expect(system[1]).toMatchObject({ type: 'text', text: expect.stringContaining('ChatKey: c1') });
      expect(system[1]!.cache_control).toBeUndefined();
    }
    // The second turn: history (user, assistant), then the new user message.
    const messages = bodies[1]!.messages as AnthropicMessage[];
    const marked = messages.flatMap((m, i) =>
      m.content.flatMap((b, j) => (b.cache_control === undefined ? [] : [[i, j, b.cache_control]])),
    );
    const lastOf = (i: number) => messages[i]!.content.length - 1;
    expect(marked).toEqual([
      [messages.length - 2, lastOf(messages.length - 2), EPHEMERAL],
      [messages.length - 1, lastOf(messages.length - 1), EPHEMERAL],
    ]);
    expect(JSON.stringify(messages.at(-1))).toContain('and again');
  });

  it('OpenAI: prompt_cache_key is the chat key on every request', async () => {
    const { bodies, fetch } = recordingFetch({
      id: 'resp_1',
      object: 'response',
      created_at: 1,
      status: 'completed',
      model: 'gpt-test',
      output: [
        {
          type: 'message',
          id: 'msg_1',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'fine, thanks', annotations: [] }],
        },
      ],
      usage: {
        input_tokens: 10,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 3,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 13,
      },
    });
    await twoTurns(createOpenAI({ apiKey: 'test', fetch })('gpt-test'));
    expect(bodies).toHaveLength(2);
    for (const body of bodies) expect(body.prompt_cache_key).toBe('c1');
  });
});
