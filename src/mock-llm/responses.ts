import { z } from 'zod';
import { openAiError } from './chat-completions.js';
import { namedEvents, type Protocol } from './protocol.js';
import { type MockMessage, type MockReply, type MockUsage, nextId, partsText, pieces } from './reply.js';

/**
 * OpenAI Responses (`POST /v1/responses`): what @ai-sdk/openai's default language model
 * speaks. Input items: messages (`role` + string or `input_text`/`output_text` parts),
 * `function_call` and `function_call_output`; an `item_reference` (an earlier output the
 * client did not resend because OpenAI stores it) stands for an assistant message.
 */

const itemSchema = z.looseObject({
  type: z.string().optional(),
  role: z.string().optional(),
  content: z.unknown().optional(),
  name: z.string().optional(),
  arguments: z.string().optional(),
  output: z.unknown().optional(),
});

const requestSchema = z.looseObject({
  model: z.string(),
  input: z.union([z.string(), z.array(itemSchema).min(1)]),
  instructions: z.string().nullish(),
  tools: z.array(z.looseObject({ type: z.string(), name: z.string().optional() })).nullish(),
  stream: z.boolean().nullish(),
});

type ResponsesRequest = z.infer<typeof requestSchema>;
type Item = z.infer<typeof itemSchema>;

const TEXT_PARTS = ['input_text', 'output_text', 'text'];

function roleOf(role: string | undefined): MockMessage['role'] {
  if (role === 'system' || role === 'developer') return 'system';
  return role === 'assistant' ? 'assistant' : 'user';
}

function toMock(items: readonly Item[]): MockMessage[] {
  const out: MockMessage[] = [];
  for (const item of items) {
    if (item.type === 'function_call') {
      const call = { name: item.name ?? '', arguments: item.arguments ?? '' };
      // Parallel calls of one step arrive as consecutive items: one assistant message.
      const last = out.at(-1);
      if (last?.role === 'assistant' && last.toolCalls) last.toolCalls.push(call);
      else out.push({ role: 'assistant', text: '', toolCalls: [call] });
    } else if (item.type === 'function_call_output') {
      out.push({ role: 'tool', text: partsText(item.output, TEXT_PARTS) });
    } else if (item.type === 'item_reference') {
      out.push({ role: 'assistant', text: '' });
    } else if (item.role !== undefined) {
      out.push({ role: roleOf(item.role), text: partsText(item.content, TEXT_PARTS) });
    }
  }
  return out;
}

function usageBody(usage: MockUsage) {
  return {
    input_tokens: usage.input,
    input_tokens_details: { cached_tokens: usage.cachedInput },
    output_tokens: usage.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.input + usage.output,
  };
}

/** The output item of an answer, complete. */
function outputItem(reply: MockReply) {
  if (reply.kind === 'tool') {
    return {
      type: 'function_call' as const,
      id: nextId('fc_'),
      call_id: reply.id,
      name: reply.name,
      arguments: reply.arguments,
      status: 'completed' as const,
    };
  }
  return {
    type: 'message' as const,
    id: nextId('msg_'),
    role: 'assistant' as const,
    status: 'completed' as const,
    content: [{ type: 'output_text' as const, text: reply.content, annotations: [] }],
  };
}

function response(
  model: string,
  id: string,
  created: number,
  status: string,
  output: object[],
  usage?: object,
) {
  return {
    id,
    object: 'response',
    created_at: created,
    status,
    model,
    output,
    incomplete_details: null,
    error: null,
    ...(usage && { usage }),
  };
}

function events(model: string, reply: MockReply, usage: MockUsage): { type: string }[] {
  const id = nextId('resp_');
  const created = Math.floor(Date.now() / 1000);
  const item = outputItem(reply);
  const out: { type: string; [k: string]: unknown }[] = [
    { type: 'response.created', response: response(model, id, created, 'in_progress', []) },
    { type: 'response.in_progress', response: response(model, id, created, 'in_progress', []) },
  ];
  if (item.type === 'function_call') {
    out.push({
      type: 'response.output_item.added',
      output_index: 0,
      item: { ...item, arguments: '', status: 'in_progress' },
    });
    for (const delta of pieces(item.arguments, 16)) {
      out.push({ type: 'response.function_call_arguments.delta', item_id: item.id, output_index: 0, delta });
    }
    out.push({
      type: 'response.function_call_arguments.done',
      item_id: item.id,
      output_index: 0,
      arguments: item.arguments,
    });
  } else {
    out.push({
      type: 'response.output_item.added',
      output_index: 0,
      item: { ...item, status: 'in_progress', content: [] },
    });
    const text = item.content[0]?.text ?? '';
    for (const delta of pieces(text)) {
      out.push({
        type: 'response.output_text.delta',
        item_id: item.id,
        output_index: 0,
        content_index: 0,
        delta,
        logprobs: [],
      });
    }
    out.push({
      type: 'response.output_text.done',
      item_id: item.id,
      output_index: 0,
      content_index: 0,
      text,
    });
  }
  out.push({ type: 'response.output_item.done', output_index: 0, item });
  out.push({
    type: 'response.completed',
    response: response(model, id, created, 'completed', [item], usageBody(usage)),
  });
  return out.map((e, i) => ({ ...e, sequence_number: i }));
}

export const responses: Protocol<ResponsesRequest> = {
  name: 'responses',
  schema: requestSchema,
  read: (body) => {
    const items: Item[] =
      typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : body.input;
    const messages = toMock(items);
    if (body.instructions) messages.unshift({ role: 'system', text: body.instructions });
    return {
      model: body.model,
      messages,
      tools: (body.tools ?? []).flatMap((t) => (t.type === 'function' && t.name ? [t.name] : [])),
      stream: body.stream === true,
      raw: items,
    };
  },
  body: (request, reply, usage) =>
    response(
      request.model,
      nextId('resp_'),
      Math.floor(Date.now() / 1000),
      'completed',
      [outputItem(reply)],
      usageBody(usage),
    ),
  stream: (request, _body, reply, usage) => namedEvents(events(request.model, reply, usage)),
  error: (message, code) => openAiError(message, code),
  failedStream: (request, failure) => {
    const started = response(
      request.model,
      nextId('resp_'),
      Math.floor(Date.now() / 1000),
      'in_progress',
      [],
    );
    return {
      opening: namedEvents([
        { type: 'response.created', response: started, sequence_number: 0 },
        { type: 'response.in_progress', response: started, sequence_number: 1 },
      ]),
      error: namedEvents([
        { type: 'error', code: failure.code, message: failure.message, param: null, sequence_number: 2 },
      ]),
    };
  },
};
