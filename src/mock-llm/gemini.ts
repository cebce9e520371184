import { z } from 'zod';
import { dataEvents, type Protocol } from './protocol.js';
import {
  argumentsObject,
  type MockMessage,
  type MockReply,
  type MockUsage,
  nextId,
  pieces,
} from './reply.js';

/**
 * Gemini `generateContent` and `streamGenerateContent` (`POST /v1beta/models/{model}:…`,
 * `?alt=sse` for SSE): what @ai-sdk/google speaks. The model is named in the path; the
 * system prompt is `systemInstruction`; contents are `user` and `model` turns of parts
 * (`text`, `functionCall`, and `functionResponse`, which a user turn carries).
 */

const partSchema = z.looseObject({
  text: z.string().nullish(),
  functionCall: z.looseObject({ name: z.string(), args: z.unknown().optional() }).nullish(),
  functionResponse: z.looseObject({ name: z.string(), response: z.unknown().optional() }).nullish(),
});

const requestSchema = z.looseObject({
  contents: z.array(z.looseObject({ role: z.string().optional(), parts: z.array(partSchema) })).min(1),
  systemInstruction: z.looseObject({ parts: z.array(partSchema) }).nullish(),
  tools: z
    .array(z.looseObject({ functionDeclarations: z.array(z.looseObject({ name: z.string() })).nullish() }))
    .nullish(),
});

type GenerateContentRequest = z.infer<typeof requestSchema>;
type Part = z.infer<typeof partSchema>;

function textOf(parts: readonly Part[]): string {
  return parts
    .filter((p) => typeof p.text === 'string' && p.functionCall == null && p.functionResponse == null)
    .map((p) => p.text)
    .join('\n');
}

/** What a function response says, as text: the SDK wraps the tool's output in `{ name, content }`. */
function responseText(response: unknown): string {
  const content = (response as { content?: unknown } | null | undefined)?.content;
  if (typeof content === 'string') return content;
  return JSON.stringify(response ?? null);
}

function toMock(role: string | undefined, parts: readonly Part[]): MockMessage[] {
  const results = parts.filter((p) => p.functionResponse != null);
  const calls = parts.flatMap((p) => (p.functionCall ? [p.functionCall] : []));
  const text = textOf(parts);
  const out: MockMessage[] = results.map((p) => ({
    role: 'tool',
    text: responseText(p.functionResponse?.response),
  }));
  if (text !== '' || calls.length > 0 || results.length === 0) {
    out.push({
      role: role === 'model' ? 'assistant' : 'user',
      text,
      ...(calls.length > 0 && {
        toolCalls: calls.map((c) => ({ name: c.name, arguments: JSON.stringify(c.args ?? {}) })),
      }),
    });
  }
  return out;
}

function usageBody(usage: MockUsage) {
  return {
    promptTokenCount: usage.input,
    candidatesTokenCount: usage.output,
    totalTokenCount: usage.input + usage.output,
    ...(usage.cachedInput > 0 && { cachedContentTokenCount: usage.cachedInput }),
  };
}

function candidate(parts: object[], finished: boolean) {
  return {
    content: { role: 'model', parts },
    index: 0,
    // Gemini ends a function call with STOP too; clients see the call in the parts.
    ...(finished && { finishReason: 'STOP' }),
  };
}

function replyParts(reply: MockReply): object[] {
  if (reply.kind === 'tool') return [{ functionCall: { name: reply.name, args: argumentsObject(reply) } }];
  return [{ text: reply.content }];
}

/** A streamed answer's chunks: text in pieces, a function call whole (as Gemini sends it). */
function chunks(model: string, reply: MockReply, usage: MockUsage): object[] {
  const responseId = nextId('gem_');
  const texts = reply.kind === 'text' ? pieces(reply.content) : [];
  const parts: object[][] = reply.kind === 'tool' ? [replyParts(reply)] : texts.map((text) => [{ text }]);
  if (parts.length === 0) parts.push([{ text: '' }]);
  return parts.map((p, i) => {
    const last = i === parts.length - 1;
    return {
      candidates: [candidate(p, last)],
      ...(last && { usageMetadata: usageBody(usage) }),
      modelVersion: model,
      responseId,
    };
  });
}

/** Gemini's error status name for an HTTP status. */
function statusName(status: number): string {
  if (status === 400) return 'INVALID_ARGUMENT';
  if (status === 401) return 'UNAUTHENTICATED';
  if (status === 403) return 'PERMISSION_DENIED';
  if (status === 404) return 'NOT_FOUND';
  if (status === 429) return 'RESOURCE_EXHAUSTED';
  if (status === 503) return 'UNAVAILABLE';
  if (status === 504) return 'DEADLINE_EXCEEDED';
  return status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION';
}

export const gemini: Protocol<GenerateContentRequest> = {
  name: 'gemini',
  schema: requestSchema,
  read: (body, params) => {
    const system = textOf(body.systemInstruction?.parts ?? []);
    return {
      model: params.model ?? '',
      messages: [
        ...(system !== '' ? [{ role: 'system' as const, text: system }] : []),
        ...body.contents.flatMap((c) => toMock(c.role, c.parts)),
      ],
      tools: (body.tools ?? []).flatMap((t) => (t.functionDeclarations ?? []).map((f) => f.name)),
      stream: params.stream === true,
      raw: body.contents,
    };
  },
  body: (request, reply, usage) => ({
    candidates: [candidate(replyParts(reply), true)],
    usageMetadata: usageBody(usage),
    modelVersion: request.model,
    responseId: nextId('gem_'),
  }),
  stream: (request, _body, reply, usage) => dataEvents(chunks(request.model, reply, usage)),
  error: (message, _code, status) => ({ error: { code: status, message, status: statusName(status) } }),
  // Gemini streams no event before its first candidate.
  failedStream: (_request, { message, status }) => ({
    opening: '',
    error: dataEvents([{ error: { code: status, message, status: statusName(status) } }]),
  }),
};

/** `streamGenerateContent` without `?alt=sse`: the chunks as one JSON array. */
export function geminiJsonStream(request: { model: string }, reply: MockReply, usage: MockUsage): object[] {
  return chunks(request.model, reply, usage);
}
