import { generateText, isStepCount, type LanguageModel, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startMockLlm } from '../../src/mock-llm/server.js';
import { createModel } from '../../src/worker/agent/model.js';

let url: string;
let close: () => Promise<void>;

beforeAll(async () => {
  ({ url, close } = await startMockLlm({ port: 0 }));
});

afterAll(async () => {
  await close();
});

type ModelV4 = Extract<LanguageModel, { specificationVersion: 'v4' }>;

function model(): ModelV4 {
  const m = createModel({ baseURL: url, apiKey: undefined, model: 'mock' });
  if (typeof m === 'string' || m.specificationVersion !== 'v4') throw new Error('expected a v4 model');
  return m;
}

const system = 'You are a test bot.\nChatKey: chat-bodies\nReply with chat_send.';

describe('the worker model', () => {
  it("returns a call's result without the request JSON and the parsed response body", async () => {
    const result = await model().doGenerate({
      prompt: [
        { role: 'system', content: system },
        { role: 'user', content: [{ type: 'text', text: 'hello' }] },
      ],
      tools: [
        {
          type: 'function',
          name: 'chat_send',
          inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
        },
      ],
    });
    expect(result.content).toEqual([
      expect.objectContaining({ type: 'tool-call', toolName: 'chat_send', input: '{"text":"echo: hello"}' }),
    ]);
    expect(result.usage.inputTokens.total).toBeGreaterThan(0);
    expect(result.response?.id).toEqual(expect.any(String));
    expect(result.request).toBeUndefined();
    expect(result.response).not.toHaveProperty('body');
  });

  it('runs the tool loop as before, with no bodies in its steps even when they are asked for', async () => {
    const sent: string[] = [];
    const result = await generateText({
      model: model(),
      instructions: system,
      messages: [{ role: 'user', content: 'hi there' }],
      tools: {
        chat_send: tool({
          inputSchema: z.object({ text: z.string() }),
          execute: async ({ text }) => {
            sent.push(text);
            return { status: 'sent' };
          },
        }),
      },
      stopWhen: isStepCount(4),
      include: { requestBody: true, responseBody: true },
    });
    expect(sent).toEqual(['echo: hi there']);
    expect(result.steps).toHaveLength(2);
    for (const step of result.steps) {
      expect(step.request.body).toBeUndefined();
      expect(step.response.body).toBeUndefined();
    }
  });
});
