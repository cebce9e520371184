import type { FastifyReply } from 'fastify';
import { geminiJsonStream } from './gemini.js';
import type { Protocol, RouteParams } from './protocol.js';
import { chatKeyOf, decideReply, messageTokens, promptTokens, usageOf } from './reply.js';
import { type MidStream, type MockLlmState, sleep } from './state.js';

/**
 * One model request, whatever its protocol: accounted for the moment it arrives (per-chat
 * concurrency, recordings, a failure it draws), held and delayed as the controls say, then
 * answered by the reply core in the protocol's shapes.
 */
export async function answer<B>(
  state: MockLlmState,
  protocol: Protocol<B>,
  body: B,
  params: RouteParams,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const request = protocol.read(body, params);
  const chatKey = chatKeyOf(request.messages);
  const prompt = promptTokens(request.messages);
  // Compared as the mock reads the conversation (every protocol's system, messages and tool
  // calls alike), with the tool definitions as sent: a change in either breaks the prefix.
  const cached = state.promptCache.read(chatKey, (body as { tools?: unknown }).tools, request.messages, (i) =>
    messageTokens(request.messages[i]!),
  );

  const { end, failure, index } = state.begin({
    chatKey,
    protocol: protocol.name,
    model: request.model,
    at: Date.now(),
    stream: request.stream,
    messages: request.raw,
    tools: request.tools,
    promptTokens: prompt,
    cachedTokens: cached,
    body,
  });
  // A client that gave up is no longer "in flight" from the caller's point of view; a
  // retry it sends next must not show up as a concurrency violation.
  const gone = new AbortController();
  reply.raw.once('close', () => {
    const clientGone = !reply.raw.writableFinished;
    if (clientGone) gone.abort();
    end(clientGone);
  });

  // A client that does not stream waits as long as the streamed answer would take (`chunkMs`
  // between its events): a provider generates the same tokens either way.
  let wholeAfterMs = 0;
  let out:
    | { status: number; json: unknown; retryAfterMs?: number }
    | { status: 200; sse: string }
    | { status: 200; failed: { opening: string; error: string }; midStream: MidStream };
  try {
    await state.delay(chatKey, gone.signal, index);
    // A Gemini stream as one JSON array has no events to fail between: it fails as usual.
    if (failure?.midStream && request.stream && !(params.stream && !params.sse)) {
      out = { status: 200, failed: protocol.failedStream(request, failure), midStream: failure.midStream };
    } else if (failure) {
      out = {
        status: failure.status,
        json: protocol.error(failure.message, failure.code, failure.status),
        retryAfterMs: failure.retryAfterMs,
      };
    } else {
      const decided = decideReply(request.messages, request.tools);
      const usage = usageOf(prompt, decided, cached);
      if (!request.stream) {
        out = { status: 200, json: protocol.body(request, decided, usage) };
        if (state.chunkMs > 0)
          wholeAfterMs =
            (sseEvents(protocol.stream(request, body, decided, usage)).length - 1) * state.chunkMs;
      } else if (params.stream && !params.sse)
        out = { status: 200, json: geminiJsonStream(request, decided, usage) };
      else out = { status: 200, sse: protocol.stream(request, body, decided, usage) };
    }
  } finally {
    // Released before the first byte goes out: a client that reacts to this response
    // with its next request must find the chat idle.
    end();
  }

  if (gone.signal.aborted) {
    // Nobody is listening; tell Fastify the reply is handled rather than leave it pending.
    reply.hijack();
    reply.raw.destroy();
    return reply;
  }
  if (wholeAfterMs > 0) {
    await sleep(wholeAfterMs, gone.signal);
    if (gone.signal.aborted) {
      reply.hijack();
      reply.raw.destroy();
      return reply;
    }
    state.recordFirstContent(chatKey, now());
  }
  if ('json' in out) {
    if (out.retryAfterMs !== undefined) reply.header('retry-after-ms', String(out.retryAfterMs));
    return reply.code(out.status).send(out.json);
  }
  reply.hijack();
  reply.raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  if ('failed' in out) {
    const { opening, error } = out.failed;
    if (out.midStream === 'error') reply.raw.end(opening + error);
    // Cut once the opening is on the wire (an SSE comment when there is none): the client has
    // its 200 and an open stream, which then breaks.
    else reply.raw.write(opening || ': opened\n\n', () => reply.raw.destroy());
    return reply;
  }
  // Without a chunk pause all events go in one write: the event boundaries are what SSE
  // clients parse. With one (`chunkMs`) or a held chat (chunkGates), a streaming client sees
  // the answer grow.
  const firstContent = (at: number) => state.recordFirstContent(chatKey, at);
  if (state.chunkMs > 0 || state.chunkGates.holds(chatKey)) {
    const gate = () => state.chunkGates.passed(chatKey, gone.signal);
    await paced(reply.raw, sseEvents(out.sse), () => state.chunkMs, firstContent, gate);
  } else {
    if (CONTENT_EVENT.test(out.sse)) firstContent(now());
    reply.raw.end(out.sse);
  }
  return reply;
}

/**
 * An event that carries reply content: a non-empty text or tool-argument delta, in any of the
 * four protocols (`content`/`arguments` of chat completions, `delta` of Responses,
 * `partial_json`/`text` of Anthropic, `text` of Gemini). Openers with `""` do not match.
 */
const CONTENT_EVENT = /"(?:content|arguments|delta|partial_json|text)":"(?:[^"\\]|\\.)/;

/** Epoch ms with sub-ms precision: comparable with another process's on the same host. */
function now(): number {
  return performance.timeOrigin + performance.now();
}

/** An SSE body's events, each with its blank-line terminator. */
function sseEvents(body: string): string[] {
  return body.split(/(?<=\n\n)/).filter((e) => e !== '');
}

/**
 * The events one by one, `pause()` ms apart; stops early when the client has gone. The pause
 * is read before each event, so a stream under way follows a change of `chunkMs` (the control
 * API's pace; a test that must act mid-reply holds the stream with `gate` instead). `firstContent`
 * gets the moment the first content event is written: the model's first token, for a
 * benchmark that times what a client sees after it. After each content event the stream
 * waits for `gate()` (chunkGates: a test lets the pieces out one by one).
 */
async function paced(
  res: NodeJS.WritableStream & { destroyed: boolean },
  events: string[],
  pause: () => number,
  firstContent: (at: number) => void,
  gate: () => Promise<void>,
) {
  let seen = false;
  for (const [i, event] of events.entries()) {
    if (res.destroyed) return;
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, pause()));
    const content = CONTENT_EVENT.test(event);
    if (!seen && content) {
      seen = true;
      firstContent(now());
    }
    res.write(event);
    if (content) await gate();
  }
  res.end();
}
