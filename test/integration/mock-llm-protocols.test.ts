import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogle } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, generateText, isStepCount, type LanguageModel, streamText, tool } from 'ai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULT_FAIL_MESSAGE, type MockLlmState, startMockLlm } from '../../src/mock-llm/server.js';
import { isOutage } from '../../src/worker/agent/failure.js';

/**
 * The mock model's other wire protocols, each through its real AI SDK provider package:
 * OpenAI Responses, Anthropic Messages and Gemini generateContent, streamed and not.
 */

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

const origin = () => url.replace(/\/v1$/, '');

const PROTOCOLS: { name: string; protocol: string; model: () => LanguageModel }[] = [
  {
    name: 'OpenAI Responses (@ai-sdk/openai)',
    protocol: 'responses',
    model: () => createOpenAI({ baseURL: url, apiKey: 'test' })('mock-openai'),
  },
  {
    name: 'Anthropic Messages (@ai-sdk/anthropic)',
    protocol: 'anthropic-messages',
    model: () => createAnthropic({ baseURL: url, apiKey: 'test' })('mock-anthropic'),
  },
  {
    name: 'Gemini generateContent (@ai-sdk/google)',
    protocol: 'gemini',
    model: () => createGoogle({ baseURL: `${origin()}/v1beta`, apiKey: 'test' })('mock-gemini'),
  },
];

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

const history = [
  { role: 'user' as const, content: 'old' },
  { role: 'assistant' as const, content: 'earlier answer' },
  { role: 'user' as const, content: 'first' },
  { role: 'user' as const, content: 'second' },
];

describe.each(PROTOCOLS)('mock-llm speaking $name', ({ protocol, model }) => {
  it('answers through chat_send and ends the loop once the tool result is back, with usage', async () => {
    const { sent, tools } = chatSend();
    const chatKey = `json-${protocol}`;
    const result = await generateText({
      model: model(),
      instructions: system(chatKey),
      messages: history,
      tools,
      stopWhen: isStepCount(4),
    });
    expect(sent).toEqual(['echo: first | second']);
    expect(result.steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'stop']);
    expect(result.steps[0]?.usage.inputTokens).toBeGreaterThan(0);
    expect(result.steps[0]?.usage.outputTokens).toBeGreaterThan(0);
    const recorded = state.recorded(chatKey);
    expect(recorded.map((r) => [r.protocol, r.stream])).toEqual([
      [protocol, false],
      [protocol, false],
    ]);
    expect(recorded[0]?.tools).toEqual(['chat_send']);
    expect(recorded[0]?.model).toMatch(/^mock-/);
  });

  it('does the same streamed', async () => {
    const { sent, tools } = chatSend();
    const chatKey = `sse-${protocol}`;
    const result = streamText({
      model: model(),
      instructions: system(chatKey),
      messages: history,
      tools,
      stopWhen: isStepCount(4),
    });
    await result.consumeStream();
    expect(sent).toEqual(['echo: first | second']);
    expect((await result.steps).map((s) => s.finishReason)).toEqual(['tool-calls', 'stop']);
    expect((await result.totalUsage).inputTokens).toBeGreaterThan(0);
    expect(state.recorded(chatKey).map((r) => [r.protocol, r.stream])).toEqual([
      [protocol, true],
      [protocol, true],
    ]);
  });

  it('loads a named skill first, then answers saying so', async () => {
    const { sent, tools } = chatSend();
    const skills_load = tool({
      description: 'Load a skill',
      inputSchema: z.object({ name: z.string() }),
      execute: async () => ({ instructions: 'be sunny' }),
    });
    await generateText({
      model: model(),
      instructions: system(`skill-${protocol}`),
      prompt: 'skill: weather in Oslo?',
      tools: { ...tools, skills_load },
      stopWhen: isStepCount(5),
    });
    expect(sent).toEqual(['echo: skill: weather in Oslo? (with skill weather)']);
  });

  it('answers text without tools, and a summary when asked to summarize', async () => {
    const echo = await generateText({
      model: model(),
      instructions: system(`text-${protocol}`),
      prompt: 'ping',
    });
    expect(echo.text).toBe('echo: ping');
    const streamed = streamText({ model: model(), instructions: system(`text-${protocol}`), prompt: 'pong' });
    expect(await streamed.text).toBe('echo: pong');
    const summary = await generateText({
      model: model(),
      instructions: `Summarize the conversation.\nChatKey: text-${protocol}`,
      messages: [
        { role: 'user', content: 'hi there' },
        { role: 'assistant', content: 'hello!' },
        { role: 'user', content: 'bye' },
      ],
    });
    expect(summary.text).toBe('## Summary\nhi there\nhello!\nbye');
  });

  it("fails with the injected error in the protocol's own shape: a 400 the client cannot retry, a 503 it can", async () => {
    const chatKey = `fail-${protocol}`;
    const call = () =>
      generateText({ model: model(), instructions: system(chatKey), prompt: 'hello', maxRetries: 0 }).catch(
        (e: unknown) => e,
      );
    state.failNext({ chatKey, count: 1 });
    const refused = await call();
    expect(APICallError.isInstance(refused)).toBe(true);
    expect((refused as APICallError).statusCode).toBe(400);
    expect((refused as APICallError).message).toBe(DEFAULT_FAIL_MESSAGE);
    expect((refused as APICallError).isRetryable).toBe(false);

    state.failNext({ chatKey, count: 1, status: 503, message: 'overloaded' });
    const down = await call();
    expect((down as APICallError).statusCode).toBe(503);
    expect((down as APICallError).isRetryable).toBe(true);

    expect(await call()).toMatchObject({ text: 'echo: hello' });
    expect(state.inFlight).toBe(0);
  });

  it('fails only the model a failure names (an outage of one model)', async () => {
    state.failNext({ model: 'some-other-model', count: 1, status: 503 });
    const ok = await generateText({
      model: model(),
      instructions: system(`model-${protocol}`),
      prompt: 'x',
      maxRetries: 0,
    });
    expect(ok.text).toBe('echo: x');
  });
});

type V4 = Extract<LanguageModel, { specificationVersion: 'v4' }>;

/**
 * How a streamed call of `model` fails: where (its open, an error part, the stream throwing)
 * and whether any content part came before it.
 */
async function streamFailure(model: LanguageModel, chatKey: string) {
  const call = (model as V4).doStream({
    prompt: [
      { role: 'system', content: system(chatKey) },
      { role: 'user', content: [{ type: 'text', text: 'hello' }] },
    ],
  });
  let opened: Awaited<typeof call>;
  try {
    opened = await call;
  } catch (error) {
    return { at: 'open', error, content: [] as string[] };
  }
  const content: string[] = [];
  try {
    for await (const part of opened.stream) {
      if (part.type === 'error') return { at: 'part', error: part.error, content };
      // Anthropic's message_start comes as a `custom` part: metadata, not content.
      if (!['stream-start', 'response-metadata', 'raw', 'custom'].includes(part.type))
        content.push(part.type);
    }
  } catch (error) {
    return { at: 'thrown', error, content };
  }
  return { at: 'none', error: undefined, content };
}

describe.each([
  ...PROTOCOLS,
  {
    name: 'chat completions (@ai-sdk/openai-compatible)',
    protocol: 'chat-completions',
    model: () => createOpenAICompatible({ name: 'mock', baseURL: url })('mock-compatible'),
  },
])('mock-llm failing an opened $name stream (failNext midStream)', ({ protocol, model }) => {
  it('sends its in-stream error before any content, which counts as an outage', async () => {
    const chatKey = `mid-${protocol}`;
    state.failNext({
      chatKey,
      count: 1,
      status: 503,
      message: 'overloaded',
      code: 'server_error',
      midStream: 'error',
    });
    const failed = await streamFailure(model(), chatKey);
    // OpenAI's package turns an error before any output into a failed open; the others hand it on as a part.
    expect(failed.at).toBe(protocol === 'responses' ? 'open' : 'part');
    expect(failed.content).toEqual([]);
    expect(isOutage(failed.error)).toBe(true);
    expect(state.recorded(chatKey).map((r) => r.stream)).toEqual([true]);
  });

  it('cuts the connection after the stream opened, before any content', async () => {
    const chatKey = `drop-${protocol}`;
    state.failNext({ chatKey, count: 1, status: 503, midStream: 'drop' });
    const failed = await streamFailure(model(), chatKey);
    expect(['open', 'thrown']).toContain(failed.at);
    expect(failed.content).toEqual([]);
    expect(isOutage(failed.error)).toBe(true);
    expect(await streamFailure(model(), chatKey)).toMatchObject({ at: 'none', error: undefined });
  });
});

describe('mock-llm wire details', () => {
  const post = (path: string, body: unknown) =>
    fetch(`${origin()}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const contents = [{ role: 'user', parts: [{ text: 'hi' }] }];
  const systemInstruction = { parts: [{ text: system('wire') }] };

  it('answers streamGenerateContent without alt=sse as one JSON array of chunks', async () => {
    const res = await post('/v1beta/models/m:streamGenerateContent', { contents, systemInstruction });
    expect(res.status).toBe(200);
    const chunks = (await res.json()) as { candidates: { content: { parts: { text: string }[] } }[] }[];
    expect(chunks.map((c) => c.candidates[0]?.content.parts[0]?.text).join('')).toBe('echo: hi');
  });

  it('sends the Gemini error shape and a 404 for a call it does not know', async () => {
    state.failNext({ count: 1, status: 429, retryAfterMs: 5 });
    const limited = await post('/v1beta/models/m:generateContent', { contents, systemInstruction });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after-ms')).toBe('5');
    expect(await limited.json()).toMatchObject({ error: { code: 429, status: 'RESOURCE_EXHAUSTED' } });
    expect((await post('/v1beta/models/m:countTokens', { contents })).status).toBe(404);
  });

  it('takes a failure for one model, with its retry-after-ms, over POST /control', async () => {
    const control = await post('/control', {
      failNext: { model: 'down', count: 1, status: 429, retryAfterMs: 7, code: 'rate_limit_exceeded' },
    });
    expect(control.status).toBe(200);
    const input = [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }];
    expect((await post('/v1/responses', { model: 'up', input })).status).toBe(200);
    const limited = await post('/v1/responses', { model: 'down', input });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after-ms')).toBe('7');
    expect(await limited.json()).toMatchObject({ error: { code: 'rate_limit_exceeded' } });
  });

  it('rejects malformed requests with a 400 in each protocol and records nothing', async () => {
    const anthropic = await post('/v1/messages', { model: 'm', messages: [] });
    expect(anthropic.status).toBe(400);
    expect(await anthropic.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    const responses = await post('/v1/responses', { model: 'm' });
    expect(responses.status).toBe(400);
    expect(await responses.json()).toMatchObject({ error: { code: 'invalid_request' } });
    const gemini = await post('/v1beta/models/m:generateContent', { contents: 'no' });
    expect(gemini.status).toBe(400);
    expect(await gemini.json()).toMatchObject({ error: { code: 400, status: 'INVALID_ARGUMENT' } });
    expect(state.requests).toBe(0);
  });

  it('holds and counts requests of every protocol per chat, like chat completions', async () => {
    state.hold('wire');
    const pending = post('/v1beta/models/m:generateContent', { contents, systemInstruction });
    await state.waitForRequest('wire');
    expect(state.inFlight).toBe(1);
    state.release('wire');
    expect((await pending).status).toBe(200);
    expect(state.stats().perChat).toEqual({ wire: 1 });
  });
});
