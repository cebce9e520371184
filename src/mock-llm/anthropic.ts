import { z } from 'zod';
import { namedEvents, type Protocol } from './protocol.js';
import {
  argumentsObject,
  type MockMessage,
  type MockReply,
  type MockUsage,
  nextId,
  partsText,
  pieces,
} from './reply.js';

/**
 * Anthropic Messages (`POST /v1/messages`): what @ai-sdk/anthropic speaks. The system prompt
 * is a field of its own; a message's content is a string or blocks (`text`, `tool_use`, and
 * `tool_result`, which a user message carries).
 */

const blockSchema = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
  name: z.string().optional(),
  input: z.unknown().optional(),
  content: z.unknown().optional(),
});

const requestSchema = z.looseObject({
  model: z.string(),
  max_tokens: z.number().int().positive(),
  system: z.union([z.string(), z.array(blockSchema)]).nullish(),
  messages: z
    .array(
      z.looseObject({
        role: z.enum(['user', 'assistant']),
        content: z.union([z.string(), z.array(blockSchema)]),
      }),
    )
    .min(1),
  tools: z.array(z.looseObject({ name: z.string(), type: z.string().optional() })).nullish(),
  stream: z.boolean().nullish(),
});

type MessagesRequest = z.infer<typeof requestSchema>;
type Block = z.infer<typeof blockSchema>;

function toMock(role: 'user' | 'assistant', content: string | Block[]): MockMessage[] {
  if (typeof content === 'string') return [{ role, text: content }];
  const results = content.filter((b) => b.type === 'tool_result');
  const calls = content.filter((b) => b.type === 'tool_use');
  const out: MockMessage[] = results.map((b) => ({ role: 'tool', text: partsText(b.content) }));
  // Anthropic wants roles to alternate, so the SDK joins consecutive user messages into one
  // message of several text blocks: each block is a user message of its own again here.
  if (role === 'user' && calls.length === 0) {
    for (const b of content) if (b.type === 'text') out.push({ role, text: b.text ?? '' });
    if (out.length === 0) out.push({ role, text: '' });
    return out;
  }
  const text = partsText(content);
  if (text !== '' || calls.length > 0 || results.length === 0) {
    out.push({
      role,
      text,
      ...(calls.length > 0 && {
        toolCalls: calls.map((b) => ({ name: b.name ?? '', arguments: JSON.stringify(b.input ?? {}) })),
      }),
    });
  }
  return out;
}

function usageBody(usage: MockUsage) {
  return {
    input_tokens: usage.input - usage.cachedInput,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: usage.cachedInput,
    output_tokens: usage.output,
  };
}

function contentBlock(reply: MockReply) {
  return reply.kind === 'tool'
    ? { type: 'tool_use' as const, id: reply.id, name: reply.name, input: argumentsObject(reply) }
    : { type: 'text' as const, text: reply.content };
}

function stopReason(reply: MockReply): 'tool_use' | 'end_turn' {
  return reply.kind === 'tool' ? 'tool_use' : 'end_turn';
}

function messageStart(model: string, usage: MockUsage) {
  const { output_tokens: _, ...startUsage } = usageBody(usage);
  return {
    type: 'message_start',
    message: {
      id: nextId('msg_'),
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...startUsage, output_tokens: 1 },
    },
  };
}

function events(model: string, reply: MockReply, usage: MockUsage): { type: string }[] {
  const out: { type: string; [k: string]: unknown }[] = [messageStart(model, usage)];
  if (reply.kind === 'tool') {
    out.push({ type: 'content_block_start', index: 0, content_block: { ...contentBlock(reply), input: {} } });
    for (const partial_json of pieces(reply.arguments, 16)) {
      out.push({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json } });
    }
  } else {
    out.push({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    out.push({ type: 'ping' });
    for (const text of pieces(reply.content)) {
      out.push({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
    }
  }
  out.push({ type: 'content_block_stop', index: 0 });
  out.push({
    type: 'message_delta',
    delta: { stop_reason: stopReason(reply), stop_sequence: null },
    usage: { output_tokens: usage.output },
  });
  out.push({ type: 'message_stop' });
  return out;
}

/** Anthropic's error type for an HTTP status (what its API answers with it). */
function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  return status >= 500 ? 'api_error' : 'invalid_request_error';
}

export const anthropicMessages: Protocol<MessagesRequest> = {
  name: 'anthropic-messages',
  schema: requestSchema,
  read: (body) => {
    const system = typeof body.system === 'string' ? body.system : partsText(body.system ?? []);
    return {
      model: body.model,
      messages: [
        ...(system !== '' ? [{ role: 'system' as const, text: system }] : []),
        ...body.messages.flatMap((m) => toMock(m.role, m.content)),
      ],
      // Only the client's own tools: Anthropic's server tools carry a `type` of their own.
      tools: (body.tools ?? []).flatMap((t) => (t.type === undefined || t.type === 'custom' ? [t.name] : [])),
      stream: body.stream === true,
      raw: body.messages,
    };
  },
  body: (request, reply, usage) => ({
    id: nextId('msg_'),
    type: 'message',
    role: 'assistant',
    model: request.model,
    content: reply.kind === 'text' && reply.content === '' ? [] : [contentBlock(reply)],
    stop_reason: stopReason(reply),
    stop_sequence: null,
    usage: usageBody(usage),
  }),
  stream: (request, _body, reply, usage) => namedEvents(events(request.model, reply, usage)),
  // Anthropic's errors carry a type, no code: the status picks the type.
  error: (message, _code, status) => ({ type: 'error', error: { type: errorType(status), message } }),
  failedStream: (request, failure) => ({
    opening: namedEvents([messageStart(request.model, { input: 0, cachedInput: 0, output: 0 })]),
    error: namedEvents([
      { type: 'error', error: { type: errorType(failure.status), message: failure.message } },
    ]),
  }),
};
