import { z } from 'zod';
import { dataEvents, type Protocol } from './protocol.js';
import { type MockMessage, type MockReply, type MockUsage, nextId, partsText, pieces } from './reply.js';

/** OpenAI Chat Completions (`POST /v1/chat/completions`): what @ai-sdk/openai-compatible speaks. */

// Loose on purpose: real clients send fields we do not care about, and a mock that
// rejects them would fail in ways a real endpoint does not.
const contentPartSchema = z.looseObject({ type: z.string(), text: z.string().optional() });
const contentSchema = z.union([z.string(), z.array(contentPartSchema)]).nullish();

const toolCallSchema = z.looseObject({
  id: z.string().optional(),
  type: z.string().optional(),
  function: z.looseObject({ name: z.string(), arguments: z.string().optional() }),
});

const messageSchema = z.looseObject({
  role: z.string().min(1),
  content: contentSchema,
  tool_calls: z.array(toolCallSchema).nullish(),
});

const requestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(messageSchema).min(1),
  tools: z
    .array(z.looseObject({ type: z.string(), function: z.looseObject({ name: z.string() }).optional() }))
    .nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
});

type ChatCompletionRequest = z.infer<typeof requestSchema>;
type Message = ChatCompletionRequest['messages'][number];

function toMock(message: Message): MockMessage {
  const role =
    message.role === 'system' || message.role === 'developer'
      ? 'system'
      : message.role === 'assistant' || message.role === 'tool'
        ? message.role
        : 'user';
  const calls = message.tool_calls ?? [];
  return {
    role,
    text: partsText(message.content),
    ...(calls.length > 0 && {
      toolCalls: calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments ?? '' })),
    }),
  };
}

function usageBody(usage: MockUsage) {
  return {
    prompt_tokens: usage.input,
    completion_tokens: usage.output,
    total_tokens: usage.input + usage.output,
    prompt_tokens_details: { cached_tokens: usage.cachedInput },
  };
}

function finishReason(reply: MockReply): 'stop' | 'tool_calls' {
  return reply.kind === 'tool' ? 'tool_calls' : 'stop';
}

function completionBody(model: string, reply: MockReply, usage: MockUsage) {
  const message =
    reply.kind === 'text'
      ? { role: 'assistant' as const, content: reply.content }
      : {
          role: 'assistant' as const,
          content: null,
          tool_calls: [
            {
              id: reply.id,
              type: 'function' as const,
              function: { name: reply.name, arguments: reply.arguments },
            },
          ],
        };
  return {
    id: nextId('chatcmpl-'),
    object: 'chat.completion' as const,
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason(reply) }],
    usage: usageBody(usage),
  };
}

/** The SSE `data:` payloads for one streamed answer, in order, without the `[DONE]` sentinel. */
function completionChunks(model: string, reply: MockReply, usage: MockUsage, includeUsage: boolean) {
  const id = nextId('chatcmpl-');
  const created = Math.floor(Date.now() / 1000);
  // OpenAI sends `usage: null` on every chunk but the last when usage was asked for.
  const usageField = includeUsage ? { usage: null } : {};
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    id,
    object: 'chat.completion.chunk' as const,
    created,
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...usageField,
  });

  const chunks: object[] = [];
  if (reply.kind === 'text') {
    chunks.push(chunk({ role: 'assistant', content: '' }));
    for (const piece of pieces(reply.content)) chunks.push(chunk({ content: piece }));
  } else {
    chunks.push(
      chunk({
        role: 'assistant',
        content: null,
        tool_calls: [
          { index: 0, id: reply.id, type: 'function', function: { name: reply.name, arguments: '' } },
        ],
      }),
    );
    for (const piece of pieces(reply.arguments, 16)) {
      chunks.push(chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }));
    }
  }
  chunks.push(chunk({}, finishReason(reply)));
  if (includeUsage) {
    chunks.push({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [],
      usage: usageBody(usage),
    });
  }
  return chunks;
}

/** OpenAI's error body; `code` and `message` are what clients and tests look at. */
export function openAiError(message: string, code: string | null) {
  return { error: { message, type: 'invalid_request_error', param: null, code } };
}

export const chatCompletions: Protocol<ChatCompletionRequest> = {
  name: 'chat-completions',
  schema: requestSchema,
  read: (body) => ({
    model: body.model,
    messages: body.messages.map(toMock),
    tools: (body.tools ?? []).flatMap((t) => (t.type === 'function' && t.function ? [t.function.name] : [])),
    stream: body.stream === true,
    raw: body.messages,
  }),
  body: (request, reply, usage) => completionBody(request.model, reply, usage),
  stream: (request, body, reply, usage) =>
    `${dataEvents(completionChunks(request.model, reply, usage, body.stream_options?.include_usage === true))}data: [DONE]\n\n`,
  error: (message, code) => openAiError(message, code),
  failedStream: (request, failure) => ({
    opening: dataEvents([
      {
        id: nextId('chatcmpl-'),
        object: 'chat.completion.chunk',
        created: Math.floor(Date.now() / 1000),
        model: request.model,
        choices: [{ index: 0, delta: { role: 'assistant' }, logprobs: null, finish_reason: null }],
      },
    ]),
    // As OpenRouter sends an error mid-stream: the HTTP status as its code.
    error: dataEvents([
      { error: { message: failure.message, type: failure.code, param: null, code: failure.status } },
    ]),
  }),
};
