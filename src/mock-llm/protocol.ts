import type { z } from 'zod';
import type { MockReply, MockRequest, MockUsage } from './reply.js';
import type { Failure } from './state.js';

/**
 * One wire protocol of the mock model: how its request reads as a conversation, and how an
 * answer, a streamed answer and an error are written in it. The server (server.ts) runs the
 * same accounting, controls and reply core for every protocol through this interface.
 */
export interface Protocol<B> {
  /** Recorded with each request (`RecordedRequest.protocol`). */
  name: ProtocolName;
  schema: z.ZodType<B>;
  /** `params` are the route's (Gemini names the model and the streaming in the path). */
  read(body: B, params: RouteParams): MockRequest;
  /** The JSON body of a whole answer. */
  body(request: MockRequest, reply: MockReply, usage: MockUsage): object;
  /** The whole streamed answer: the text of the SSE response. */
  stream(request: MockRequest, body: B, reply: MockReply, usage: MockUsage): string;
  /** The error body a client of this protocol parses (`failure.status` is the HTTP status). */
  error(message: string, code: string, status: number): object;
  /**
   * A streamed answer that fails before its content (`failNext` with `midStream`): the SSE
   * events it opens with, and the protocol's in-stream error event for `failure`.
   */
  failedStream(request: MockRequest, failure: Failure): { opening: string; error: string };
}

export type ProtocolName = 'chat-completions' | 'responses' | 'anthropic-messages' | 'gemini';

export interface RouteParams {
  /** Gemini: the model named in the path. */
  model?: string;
  /** Gemini: `streamGenerateContent` was called. */
  stream?: boolean;
  /** Gemini: `?alt=sse` (otherwise a stream is one JSON array). */
  sse?: boolean;
}

/** `data:` lines only, as OpenAI and Gemini send them. */
export function dataEvents(payloads: readonly object[]): string {
  return payloads.map((p) => `data: ${JSON.stringify(p)}\n\n`).join('');
}

/** `event:` and `data:` lines, as the Responses API and Anthropic send them. */
export function namedEvents(payloads: readonly { type: string; [k: string]: unknown }[]): string {
  return payloads.map((p) => `event: ${p.type}\ndata: ${JSON.stringify(p)}\n\n`).join('');
}
