import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, generateText, isStepCount, streamText, tool } from 'ai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  DEFAULT_FAIL_MESSAGE,
  type MockLlmState,
  type RecordedRequest,
  startMockLlm,
} from '../../src/mock-llm/server.js';
import { ConfigError, loadMockLlmConfig } from '../../src/shared/config.js';

/**
 * A latency under test and the bound an undelayed request answers within, far apart: a request
 * timed against a 60 ms delay took 115 ms without it on a loaded CI run.
 */
const DELAY_MS = 1000;
const PROMPT_MS = 500;

let url: string;
let state: MockLlmState;
let close: () => Promise<void>;

beforeAll(async () => {
  ({ url, state, close } = await startMockLlm({ port: 0 }));
});

afterAll(async () => {
  await close();
});

afterEach(() => {
  state.reset();
});

function model() {
  return createOpenAICompatible({ name: 'mock', baseURL: url }).chatModel('mock');
}

/** A `chat_send` tool that remembers what the model sent. */
function chatSend() {
  const sent: string[] = [];
  const chat_send = tool({
    description: 'Send a message to the chat',
    inputSchema: z.object({ text: z.string() }),
    execute: async ({ text }) => {
      sent.push(text);
      return { ok: true };
    },
  });
  return { sent, tools: { chat_send } };
}

function system(chatKey: string): string {
  return `You are a helpful bot.\nChatKey: ${chatKey}\nReply with chat_send.`;
}

function completionRequest(chatKey: string, text: string, extra: Record<string, unknown> = {}) {
  return fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'whatever-model',
      messages: [
        { role: 'system', content: system(chatKey) },
        { role: 'user', content: text },
      ],
      ...extra,
    }),
  });
}

const origin = () => url.replace(/\/v1$/, '');

/** A paced `chat_send` answer read to its end; `onRead` sees the text so far after each read. */
async function readPacedToolCall(
  chatKey: string,
  onRead: (text: string) => void = () => undefined,
): Promise<string> {
  const res = await completionRequest(chatKey, 'a reply long enough for several pieces', {
    stream: true,
    tools: [{ type: 'function', function: { name: 'chat_send', parameters: { type: 'object' } } }],
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += decoder.decode(value);
    onRead(text);
  }
}

describe('mock-llm with the AI SDK', () => {
  it('streams a chat_send("echo: hello") call and ends the loop once the tool result is back', async () => {
    const { sent, tools } = chatSend();
    const result = streamText({
      model: model(),
      instructions: system('chat-stream'),
      prompt: 'hello',
      tools,
      stopWhen: isStepCount(4),
    });
    await result.consumeStream();
    const steps = await result.steps;

    expect(sent).toEqual(['echo: hello']);
    expect(steps).toHaveLength(2);
    expect(steps[0]?.finishReason).toBe('tool-calls');
    expect(steps[1]?.finishReason).toBe('stop');
    expect(await result.text).toBe('');
    expect(state.perChat).toEqual({ 'chat-stream': 2 });
    expect(state.recorded('chat-stream').map((r) => r.stream)).toEqual([true, true]);
  });

  it('does the same without streaming and reports token usage', async () => {
    const { sent, tools } = chatSend();
    const result = await generateText({
      model: model(),
      instructions: system('chat-json'),
      prompt: 'hello',
      tools,
      stopWhen: isStepCount(4),
    });

    expect(sent).toEqual(['echo: hello']);
    expect(result.steps).toHaveLength(2);
    expect(result.text).toBe('');
    expect(result.steps[0]?.toolCalls[0]?.input).toEqual({ text: 'echo: hello' });
    expect(result.steps[0]?.usage.inputTokens).toBeGreaterThan(0);
    expect(result.steps[0]?.usage.outputTokens).toBeGreaterThan(0);
    expect(state.perChat).toEqual({ 'chat-json': 2 });
    const [first, second] = state.recorded('chat-json');
    expect(first?.stream).toBe(false);
    expect(first?.tools).toEqual(['chat_send']);
    expect(first?.promptTokens).toBeGreaterThan(0);
    expect(second?.messages.at(-1)).toMatchObject({ role: 'tool' });
  });

  it('echoes every user message since the last assistant message, joined with " | "', async () => {
    const { sent, tools } = chatSend();
    await generateText({
      model: model(),
      instructions: system('chat-merge'),
      messages: [
        { role: 'user', content: 'old' },
        { role: 'assistant', content: 'earlier answer' },
        { role: 'user', content: 'first' },
        { role: 'user', content: [{ type: 'text', text: 'second' }] },
      ],
      tools,
      stopWhen: isStepCount(4),
    });
    expect(sent).toEqual(['echo: first | second']);
  });

  it('loads a skill the user names ("skill: x") with skills_load, then answers saying so', async () => {
    const { sent, tools } = chatSend();
    const loaded: string[] = [];
    const skills_load = tool({
      description: 'Load a skill',
      inputSchema: z.object({ name: z.string() }),
      execute: async ({ name }) => {
        loaded.push(name);
        return { instructions: 'be sunny' };
      },
    });
    await generateText({
      model: model(),
      instructions: system('chat-skill'),
      messages: [{ role: 'user', content: 'skill: weather in Oslo?' }],
      tools: { ...tools, skills_load },
      stopWhen: isStepCount(5),
    });
    expect(loaded).toEqual(['weather']);
    expect(sent).toEqual(['echo: skill: weather in Oslo? (with skill weather)']);
  });

  it('calls an offered tool the user names ("tool: x {json}") with that input, then says what it returned; an unoffered one it ignores', async () => {
    const { sent, tools } = chatSend();
    const inputs: unknown[] = [];
    const lookup = tool({
      description: 'Look up an order',
      inputSchema: z.object({ order: z.string() }),
      execute: async (input) => {
        inputs.push(input);
        return { status: 'shipped' };
      },
    });
    await generateText({
      model: model(),
      instructions: system('chat-tool'),
      messages: [{ role: 'user', content: 'where is it? tool: lookup {"order":"42"}' }],
      tools: { ...tools, lookup },
      stopWhen: isStepCount(5),
    });
    expect(inputs).toEqual([{ order: '42' }]);
    expect(sent).toEqual([
      'echo: where is it? tool: lookup {"order":"42"} (tool lookup: {"status":"shipped"})',
    ]);

    const plain = chatSend();
    await generateText({
      model: model(),
      instructions: system('chat-tool'),
      messages: [{ role: 'user', content: 'tool: missing' }],
      tools: plain.tools,
      stopWhen: isStepCount(5),
    });
    expect(plain.sent).toEqual(['echo: tool: missing']);
  });

  it('answers plain text without tools, and a summary when asked to summarize', async () => {
    const echo = await generateText({ model: model(), instructions: system('chat-text'), prompt: 'ping' });
    expect(echo.text).toBe('echo: ping');

    const streamed = streamText({ model: model(), instructions: system('chat-text'), prompt: 'pong' });
    expect(await streamed.text).toBe('echo: pong');

    const summary = await generateText({
      model: model(),
      instructions: 'Summarize the conversation.\nChatKey: chat-text',
      messages: [
        { role: 'user', content: 'hi there' },
        { role: 'assistant', content: 'hello!' },
        { role: 'user', content: 'x'.repeat(400) },
      ],
    });
    expect(summary.text.startsWith('## Summary\nhi there\nhello!\nxxx')).toBe(true);
    expect(summary.text).toHaveLength('## Summary\n'.length + 300);
    expect(state.perChat).toEqual({ 'chat-text': 3 });
  });

  it('fails the next request with the context-length error, then succeeds', async () => {
    state.failNext({ chatKey: 'chat-fail', count: 1 });
    const { tools } = chatSend();
    const call = () =>
      generateText({
        model: model(),
        instructions: system('chat-fail'),
        prompt: 'hello',
        tools,
        stopWhen: isStepCount(4),
        maxRetries: 0,
      });

    const error = await call().catch((e: unknown) => e);
    expect(APICallError.isInstance(error)).toBe(true);
    const apiError = error as APICallError;
    expect(apiError.statusCode).toBe(400);
    expect(apiError.message).toBe(DEFAULT_FAIL_MESSAGE);
    expect(apiError.responseBody).toContain('context_length_exceeded');

    const ok = await call();
    expect(ok.steps).toHaveLength(2);
    expect(state.requests).toBe(3);
    expect(state.inFlight).toBe(0);
  });

  it('does not leak failNext to other chats', async () => {
    state.failNext({ chatKey: 'chat-other', count: 1, status: 500, message: 'boom', code: 'server_error' });
    expect((await completionRequest('chat-fine', 'a')).status).toBe(200);
    const failed = await completionRequest('chat-other', 'b');
    expect(failed.status).toBe(500);
    expect(await failed.json()).toEqual({
      error: { message: 'boom', type: 'invalid_request_error', param: null, code: 'server_error' },
    });
  });
});

describe('mock-llm concurrency tracking', () => {
  it('records a violation when one chat has two requests in flight', async () => {
    state.hold('chat-x');
    const both = [completionRequest('chat-x', 'one'), completionRequest('chat-x', 'two')];
    await state.waitForRequest('chat-x', 2);

    expect(state.inFlight).toBe(2);
    expect(state.maxInFlightPerChat).toBe(2);
    expect(state.violations).toHaveLength(1);
    expect(state.violations[0]).toMatchObject({ chatKey: 'chat-x', inFlight: 2 });

    state.release('chat-x');
    const responses = await Promise.all(both);
    expect(responses.map((r) => r.status)).toEqual([200, 200]);
    expect(state.inFlight).toBe(0);
  });

  it('records none for concurrent requests of different chats', async () => {
    state.hold('chat-a');
    state.hold('chat-b');
    const both = [completionRequest('chat-a', 'one'), completionRequest('chat-b', 'two')];
    await Promise.all([state.waitForRequest('chat-a', 1), state.waitForRequest('chat-b', 1)]);

    expect(state.inFlight).toBe(2);
    expect(state.maxInFlightPerChat).toBe(1);
    expect(state.violations).toEqual([]);

    state.release('chat-a');
    state.release('chat-b');
    await Promise.all(both);
    expect(state.inFlight).toBe(0);
  });

  it('records none when one chat sends its requests one after another', async () => {
    const { tools } = chatSend();
    for (const prompt of ['a', 'b', 'c']) {
      const result = streamText({
        model: model(),
        instructions: system('chat-serial'),
        prompt,
        tools,
        stopWhen: isStepCount(4),
      });
      await result.consumeStream();
    }
    expect(state.perChat).toEqual({ 'chat-serial': 6 });
    expect(state.maxInFlightPerChat).toBe(1);
    expect(state.violations).toEqual([]);
  });

  it('holds a chat until released, without holding other chats', async () => {
    state.hold('chat-held');
    let done = false;
    const held = completionRequest('chat-held', 'wait').then((r) => {
      done = true;
      return r;
    });
    await state.waitForRequest('chat-held', 1);

    const other = await completionRequest('chat-free', 'go');
    expect(other.status).toBe(200);
    await new Promise((r) => setTimeout(r, 50));
    expect(done).toBe(false);

    state.release('chat-held');
    const body = (await (await held).json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]?.message.content).toBe('echo: wait');
  });

  it('stops counting a request in flight when its client goes away', async () => {
    state.hold('chat-gone');
    const abort = new AbortController();
    const request = fetch(`${url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'system', content: system('chat-gone') }] }),
      signal: abort.signal,
    }).catch(() => 'aborted');
    await state.waitForRequest('chat-gone', 1);
    expect(state.inFlight).toBe(1);

    abort.abort();
    expect(await request).toBe('aborted');
    await expect.poll(() => state.inFlight).toBe(0);
  });

  it('counts a request with no ChatKey line as "(none)"', async () => {
    const res = await fetch(`${url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'hey' }] }),
    });
    expect(res.status).toBe(200);
    expect(state.perChat).toEqual({ '(none)': 1 });
  });

  it('applies the global latency and a per-chat override', async () => {
    state.setLatency([DELAY_MS, DELAY_MS]);
    state.setChatLatency('chat-fast', 0);
    let started = Date.now();
    await completionRequest('chat-slow', 'a');
    expect(Date.now() - started).toBeGreaterThanOrEqual(DELAY_MS - 5);
    started = Date.now();
    await completionRequest('chat-fast', 'b');
    expect(Date.now() - started).toBeLessThan(PROMPT_MS);
  });

  it("delays each chat's requests from the Nth on, so a turn's second call can wait while its first does not", async () => {
    state.setLaterRequestLatency({ from: 2, ms: DELAY_MS });
    const timed = async (chatKey: string) => {
      const started = Date.now();
      expect((await completionRequest(chatKey, 'a')).status).toBe(200);
      return Date.now() - started;
    };
    expect(await timed('chat-later')).toBeLessThan(PROMPT_MS);
    expect(await timed('chat-other')).toBeLessThan(PROMPT_MS);
    expect(await timed('chat-later')).toBeGreaterThanOrEqual(DELAY_MS - 5);
    expect(await timed('chat-later')).toBeGreaterThanOrEqual(DELAY_MS - 5);

    state.setChatLatency('chat-later', 0);
    expect(await timed('chat-later')).toBeLessThan(PROMPT_MS);
    state.setLaterRequestLatency(undefined);
    expect(await timed('chat-other')).toBeLessThan(PROMPT_MS);
    expect(() => state.setLaterRequestLatency({ from: 0, ms: 5 })).toThrow(RangeError);
  });
});

describe('mock-llm HTTP surface', () => {
  it('streams OpenAI chunks with a final usage chunk when include_usage is set', async () => {
    const res = await completionRequest('chat-sse', 'hi', {
      stream: true,
      stream_options: { include_usage: true },
      tools: [{ type: 'function', function: { name: 'chat_send', parameters: { type: 'object' } } }],
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = (await res.text())
      .split('\n\n')
      .filter((e) => e !== '')
      .map((e) => e.replace(/^data: /, ''));
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].choices[0].delta.tool_calls[0]).toMatchObject({
      index: 0,
      type: 'function',
      function: { name: 'chat_send', arguments: '' },
    });
    const args = chunks
      .flatMap((c) => c.choices)
      .map((c) => c.delta.tool_calls?.[0]?.function.arguments ?? '')
      .join('');
    expect(JSON.parse(args)).toEqual({ text: 'echo: hi' });
    expect(chunks.at(-2).choices[0].finish_reason).toBe('tool_calls');
    expect(chunks.at(-1).choices).toEqual([]);
    expect(chunks.at(-1).usage.prompt_tokens).toBeGreaterThan(0);
  });

  it('with chunkMs set over /control, a streamed answer arrives chunk by chunk, that far apart', async () => {
    const control = await fetch(`${origin()}/control`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ chunkMs: 30 }),
    });
    expect(control.status).toBe(200);
    try {
      const started = Date.now();
      let firstAt = 0;
      const text = await readPacedToolCall('chat-paced', () => {
        firstAt ||= Date.now();
      });
      const events = text.split('\n\n').filter((e) => e !== '');
      expect(events.at(-1)).toBe('data: [DONE]');
      expect(events.length).toBeGreaterThan(4);
      // Each event after the first waits chunkMs: the last comes at least that long after the first.
      expect(Date.now() - started).toBeGreaterThanOrEqual(29 * (events.length - 1));
      expect(Date.now() - firstAt).toBeGreaterThanOrEqual(29 * (events.length - 2));
    } finally {
      state.chunkMs = 0;
    }
  });

  it('a chunkMs change applies to a stream under way, from its next chunk', async () => {
    // At 1 s a chunk the answer would take several seconds; set to 0 after the first read,
    // the rest comes at once.
    state.chunkMs = 1000;
    try {
      let firstAt = 0;
      const text = await readPacedToolCall('chat-repaced', () => {
        if (firstAt) return;
        firstAt = Date.now();
        state.chunkMs = 0;
      });
      const events = text.split('\n\n').filter((e) => e !== '');
      expect(events.at(-1)).toBe('data: [DONE]');
      expect(events.length).toBeGreaterThan(4);
      // Unchanged, the rest would take ≥ (events − 1) s; one pause (~1 s) was already under way.
      expect(Date.now() - firstAt).toBeLessThan(1000 * (events.length - 2));
    } finally {
      state.chunkMs = 0;
    }
  });

  it('records when a streamed answer wrote its first content event, once per answer with content', async () => {
    state.chunkMs = 40;
    try {
      const clock = () => performance.timeOrigin + performance.now();
      const sent = clock();
      let contentReadAt = 0;
      await readPacedToolCall('fc-chat', (text) => {
        // The opener names the tool with empty arguments; the next event carries the first piece.
        if (!contentReadAt && /"arguments":"[^"]/.test(text)) contentReadAt = clock();
      });
      const { firstContentAt } = (await (
        await fetch(`${origin()}/first-content?chatKeyPrefix=fc-`)
      ).json()) as {
        firstContentAt: Record<string, number[]>;
      };
      expect(Object.keys(firstContentAt)).toEqual(['fc-chat']);
      const [at] = firstContentAt['fc-chat']!;
      expect(at).toBeGreaterThan(sent);
      expect(at).toBeLessThanOrEqual(contentReadAt);

      // An answer without content (the turn's closing empty text) records nothing more.
      await (
        await fetch(`${url}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'm',
            stream: true,
            messages: [
              { role: 'system', content: system('fc-chat') },
              { role: 'user', content: 'hi' },
              {
                role: 'assistant',
                content: null,
                tool_calls: [
                  { id: 'c1', type: 'function', function: { name: 'chat_send', arguments: '{}' } },
                ],
              },
              { role: 'tool', tool_call_id: 'c1', content: 'sent' },
            ],
          }),
        })
      ).text();
      const after = (await (await fetch(`${origin()}/first-content?chatKeyPrefix=fc-`)).json()) as {
        firstContentAt: Record<string, number[]>;
      };
      expect(after.firstContentAt['fc-chat']).toHaveLength(1);
      expect((await fetch(`${origin()}/first-content`)).status).toBe(400);
    } finally {
      state.chunkMs = 0;
    }
  });

  it('records the first content of an unpaced streamed answer too, in every protocol', async () => {
    const body = (chatKey: string) => ({
      model: 'm',
      stream: true,
      messages: [
        { role: 'system', content: system(chatKey) },
        { role: 'user', content: 'hello there' },
      ],
    });
    const post = (path: string, payload: object) =>
      fetch(`${origin()}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(payload),
      }).then((r) => r.text());
    await post('/v1/chat/completions', body('fcp-completions'));
    await post('/v1/responses', {
      model: 'm',
      stream: true,
      instructions: system('fcp-responses'),
      input: [{ role: 'user', content: 'hello there' }],
    });
    await post('/v1/messages', {
      model: 'm',
      stream: true,
      max_tokens: 100,
      system: system('fcp-anthropic'),
      messages: [{ role: 'user', content: 'hello there' }],
    });
    await post('/v1beta/models/m:streamGenerateContent?alt=sse', {
      systemInstruction: { parts: [{ text: system('fcp-gemini') }] },
      contents: [{ role: 'user', parts: [{ text: 'hello there' }] }],
    });
    const { firstContentAt } = (await (
      await fetch(`${origin()}/first-content?chatKeyPrefix=fcp-`)
    ).json()) as {
      firstContentAt: Record<string, number[]>;
    };
    expect(Object.keys(firstContentAt).sort()).toEqual([
      'fcp-anthropic',
      'fcp-completions',
      'fcp-gemini',
      'fcp-responses',
    ]);
    for (const times of Object.values(firstContentAt)) expect(times).toHaveLength(1);
  });

  it("reports as cached the leading messages identical to the chat's previous request, per chat", async () => {
    type Usage = { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
    // The chat is named by the system message's ChatKey line, as the worker's requests name it.
    const post = (messages: object[], tools: object[] = []) =>
      fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages, tools }),
      }).then(async (r) => ((await r.json()) as { usage: Usage }).usage);
    const sys = { role: 'system', content: system('chat-pc') };
    const u1 = { role: 'user', content: 'first question about the deploy window' };
    const a1 = { role: 'assistant', content: 'echo: first question about the deploy window' };
    const u2 = { role: 'user', content: 'second one' };
    const first = await post([sys, u1]);
    expect(first.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    const second = await post([sys, u1, a1, u2]);
    const lastTwo = second.prompt_tokens - first.prompt_tokens;
    expect(second.prompt_tokens_details.cached_tokens).toBe(first.prompt_tokens);
    expect(lastTwo).toBeGreaterThan(0);
    // Another chat's identical prefix is not this chat's cache.
    expect(
      (await post([{ role: 'system', content: system('chat-other') }, u1])).prompt_tokens_details,
    ).toEqual({ cached_tokens: 0 });
    // A changed first message ends the prefix at once; other tools end it before the messages.
    const changed = await post([{ ...sys, content: `${sys.content} ` }, u1, a1, u2]);
    expect(changed.prompt_tokens_details.cached_tokens).toBe(0);
    const tools = [{ type: 'function', function: { name: 'chat_send', parameters: { type: 'object' } } }];
    expect((await post([{ ...sys, content: `${sys.content} ` }, u1], tools)).prompt_tokens_details).toEqual({
      cached_tokens: 0,
    });
    // The real client reads it as the AI SDK's cached input.
    const result = await generateText({ model: model(), system: system('chat-sdk'), prompt: 'hello there' });
    const again = await generateText({
      model: model(),
      system: system('chat-sdk'),
      messages: [
        { role: 'user', content: 'hello there' },
        { role: 'assistant', content: result.text },
        { role: 'user', content: 'and again' },
      ],
    });
    expect(result.usage.inputTokenDetails.cacheReadTokens).toBe(0);
    expect(again.usage.inputTokenDetails.cacheReadTokens).toBe(result.usage.inputTokens);
    const recorded = state.recorded('chat-sdk');
    expect(recorded.map((r) => r.cachedTokens)).toEqual([0, result.usage.inputTokens]);
    expect(recorded[1]?.body).toMatchObject({ model: 'mock', messages: recorded[1]?.messages });
  });

  it('serves /stats, /requests, /v1/models and /healthz', async () => {
    await completionRequest('chat-h', 'one');
    await completionRequest('chat-i', 'two');

    const stats = await (await fetch(`${origin()}/stats`)).json();
    expect(stats).toEqual({
      requests: 2,
      inFlight: 0,
      maxInFlightPerChat: 1,
      violations: [],
      perChat: { 'chat-h': 1, 'chat-i': 1 },
    });
    const recorded = (await (await fetch(`${origin()}/requests?chatKey=chat-h`)).json()) as RecordedRequest[];
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ chatKey: 'chat-h', stream: false, tools: [] });
    expect(recorded[0]?.messages[1]).toEqual({ role: 'user', content: 'one' });

    expect(await (await fetch(`${url}/models`)).json()).toMatchObject({
      data: [{ id: 'mock', object: 'model' }],
    });
    expect((await fetch(`${origin()}/healthz`)).status).toBe(200);
  });

  it('/stats?chatKeyPrefix= narrows every figure to the chats under that prefix', async () => {
    await completionRequest('run1-a', 'one');
    await completionRequest('other-b', 'two');
    // Two requests of run1-b at once: a violation that must show under the prefix.
    state.hold('run1-b');
    const first = completionRequest('run1-b', 'x');
    const second = completionRequest('run1-b', 'y');
    await state.waitForRequest('run1-b', 2);
    const during = await (await fetch(`${origin()}/stats?chatKeyPrefix=run1-`)).json();
    expect(during).toMatchObject({ requests: 3, inFlight: 2, maxInFlightPerChat: 2 });
    state.release('run1-b');
    await Promise.all([first, second]);

    const stats = (await (await fetch(`${origin()}/stats?chatKeyPrefix=run1-`)).json()) as {
      violations: unknown[];
    };
    expect(stats).toMatchObject({
      requests: 3,
      inFlight: 0,
      maxInFlightPerChat: 2,
      perChat: { 'run1-a': 1, 'run1-b': 2 },
    });
    expect(stats.violations).toEqual([expect.objectContaining({ chatKey: 'run1-b', inFlight: 2 })]);
    const other = await (await fetch(`${origin()}/stats?chatKeyPrefix=other-`)).json();
    expect(other).toEqual({
      requests: 1,
      inFlight: 0,
      maxInFlightPerChat: 1,
      violations: [],
      perChat: { 'other-b': 1 },
    });
    expect((await fetch(`${origin()}/stats?chatKeyPrefix=`)).status).toBe(400);
  });

  it('controls latency, failures and holds over POST /control, and clears them with POST /reset', async () => {
    const control = (body: unknown) =>
      fetch(`${origin()}/control`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await control({ failNext: { count: 1 }, chatLatencyMs: { 'chat-c': 5 } })).status).toBe(200);
    const failed = await completionRequest('chat-c', 'x');
    expect(failed.status).toBe(400);
    expect(((await failed.json()) as { error: { code: string } }).error.code).toBe('context_length_exceeded');

    expect((await control({ hold: ['chat-c'] })).status).toBe(200);
    const held = completionRequest('chat-c', 'y');
    await state.waitForRequest('chat-c', 2);
    expect((await control({ release: ['chat-c'] })).status).toBe(200);
    expect((await held).status).toBe(200);

    const timed = async (chatKey: string) => {
      const started = Date.now();
      expect((await completionRequest(chatKey, 'w')).status).toBe(200);
      return Date.now() - started;
    };
    expect((await control({ laterRequestLatency: { from: 1, ms: DELAY_MS } })).status).toBe(200);
    expect(await timed('chat-d')).toBeGreaterThanOrEqual(DELAY_MS - 5);
    expect((await control({ laterRequestLatency: null })).status).toBe(200);
    expect(await timed('chat-d')).toBeLessThan(PROMPT_MS);

    await control({ failNext: { count: 5 }, laterRequestLatency: { from: 1, ms: DELAY_MS } });
    expect((await fetch(`${origin()}/reset`, { method: 'POST' })).status).toBe(200);
    expect(state.requests).toBe(0);
    expect(state.recorded()).toEqual([]);
    expect(await timed('chat-c')).toBeLessThan(PROMPT_MS);
  });

  it('rejects bad control input with a 400 error body', async () => {
    const post = (body: string) =>
      fetch(`${origin()}/control`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

    const badJson = await post('{"latencyMs": [1,');
    expect(badJson.status).toBe(400);
    const badJsonBody = (await badJson.json()) as { error: { code: string; message: string } };
    expect(badJsonBody.error.code).toBe('invalid_json');
    expect(badJsonBody.error.message).toEqual(expect.any(String));

    const badShape = await post(JSON.stringify({ latencyMs: [10, 1] }));
    expect(badShape.status).toBe(400);
    expect(((await badShape.json()) as { error: { code: string } }).error.code).toBe('invalid_request');

    expect((await post(JSON.stringify({ nonsense: true }))).status).toBe(400);
    expect((await post(JSON.stringify({ laterRequestLatency: { from: 0, ms: 5 } }))).status).toBe(400);
  });

  it('rejects a malformed completion request with an OpenAI-style 400', async () => {
    const res = await fetch(`${url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock', messages: 'not a list' }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { type: 'invalid_request_error', param: null, message: expect.stringContaining('messages') },
    });
    expect(state.requests).toBe(0);
  });
});

describe('loadMockLlmConfig', () => {
  it('defaults to 127.0.0.1:4010 with no latency', () => {
    expect(loadMockLlmConfig({})).toEqual({
      MOCK_LLM_HOST: '127.0.0.1',
      MOCK_LLM_PORT: 4010,
      MOCK_LLM_LATENCY_MS: [0, 0],
      MOCK_LLM_CHUNK_MS: 0,
    });
  });

  it('parses a fixed latency and a range', () => {
    expect(loadMockLlmConfig({ MOCK_LLM_LATENCY_MS: '25' }).MOCK_LLM_LATENCY_MS).toEqual([25, 25]);
    expect(loadMockLlmConfig({ MOCK_LLM_LATENCY_MS: '10-200' }).MOCK_LLM_LATENCY_MS).toEqual([10, 200]);
  });

  it('throws a ConfigError naming the bad variable', () => {
    expect(() => loadMockLlmConfig({ MOCK_LLM_LATENCY_MS: '200-10' })).toThrow(ConfigError);
    expect(() => loadMockLlmConfig({ MOCK_LLM_LATENCY_MS: 'fast' })).toThrow(/MOCK_LLM_LATENCY_MS/);
    expect(() => loadMockLlmConfig({ MOCK_LLM_PORT: '70000' })).toThrow(/MOCK_LLM_PORT/);
  });
});
