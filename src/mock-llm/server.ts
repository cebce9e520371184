import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import { loadMockLlmConfig } from '../shared/config.js';
import { createLogger } from '../shared/logger.js';
import { answer } from './answer.js';
import { anthropicMessages } from './anthropic.js';
import { chatCompletions, openAiError } from './chat-completions.js';
import { gemini } from './gemini.js';
import type { Protocol, RouteParams } from './protocol.js';
import { responses } from './responses.js';
import { type LatencyRange, MockLlmState } from './state.js';

/**
 * The project's own model server: deterministic replies that drive the worker's `chat_send`
 * loop, in the wire protocols of OpenAI (chat completions and Responses), Anthropic
 * (Messages) and Gemini (generateContent), streamed or not, plus the counters (per-chat concurrency above all) and
 * controls (latency, injected failures, hold gates) that integration tests and benchmarks
 * need. Not a simulation mode of the worker: the worker talks to it over real HTTP.
 */

export {
  DEFAULT_FAIL_CODE,
  DEFAULT_FAIL_MESSAGE,
  type FailNextInput,
  MockLlmState,
  type MockLlmStats,
  NO_CHAT_KEY,
  type RecordedRequest,
  type Violation,
} from './state.js';

export interface MockLlmOptions {
  latencyMs?: [number, number];
  /** Pause between the chunks of a streamed answer (default 0: all at once). */
  chunkMs?: number;
  host?: string;
  port?: number;
  maxRecorded?: number;
}

export interface RunningMockLlm {
  /** Base URL for an OpenAI-compatible client, ending in `/v1`. */
  url: string;
  state: MockLlmState;
  close(): Promise<void>;
}

// Whole chat histories arrive in one body; the default 1 MiB is too tight for benchmarks.
const BODY_LIMIT_BYTES = 64 * 1024 * 1024;

const msSchema = z.number().min(0).max(3_600_000);

const controlSchema = z.strictObject({
  latencyMs: z
    .tuple([msSchema, msSchema])
    .refine(([min, max]) => min <= max, 'latencyMs must be [min, max] with min <= max')
    .optional(),
  /** `null` removes a chat's override. */
  chatLatencyMs: z.record(z.string().min(1), msSchema.nullable()).optional(),
  /** Every chat's `from`-th request and later wait `ms` (a turn's second call: `from` 2); `null` removes it. */
  laterRequestLatency: z
    .strictObject({ from: z.number().int().min(1), ms: msSchema })
    .nullable()
    .optional(),
  failNext: z
    .strictObject({
      chatKey: z.string().min(1).optional(),
      count: z.number().int().min(0),
      status: z.number().int().min(400).max(599).optional(),
      message: z.string().optional(),
      code: z.string().optional(),
      contains: z.string().min(1).optional(),
      model: z.string().min(1).optional(),
      retryAfterMs: msSchema.optional(),
      midStream: z.enum(['error', 'drop']).optional(),
    })
    .optional(),
  // Over HTTP too, so an out-of-process test can pin a chat's request in flight.
  hold: z.array(z.string().min(1)).optional(),
  release: z.array(z.string().min(1)).optional(),
  /** Pause between the chunks of a streamed answer, so a client sees the answer grow. */
  chunkMs: msSchema.optional(),
});

const requestsQuerySchema = z.object({ chatKey: z.string().min(1).optional() });
const statsQuerySchema = z.object({ chatKeyPrefix: z.string().min(1).max(200).optional() });
const firstContentQuerySchema = z.object({ chatKeyPrefix: z.string().min(1).max(200) });

function zodMessage(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ');
}

function sendBadRequest(reply: FastifyReply, message: string) {
  return reply.code(400).send(openAiError(message, 'invalid_request'));
}

const thrownSchema = z.looseObject({
  statusCode: z.number().optional().catch(undefined),
  code: z.string().optional().catch(undefined),
  message: z.string().catch('internal error'),
});

/** Fastify hands error handlers `unknown`; only these fields shape the response. */
function errorFields(error: unknown): z.infer<typeof thrownSchema> {
  const parsed = thrownSchema.safeParse(error);
  return parsed.success ? parsed.data : { statusCode: undefined, code: undefined, message: String(error) };
}

function sendNotFound(reply: FastifyReply, request: FastifyRequest) {
  return reply.code(404).send(openAiError(`no route ${request.method} ${request.url}`, 'not_found'));
}

const geminiQuerySchema = z.looseObject({ alt: z.string().optional() });
const GEMINI_CALL = /^(.+):(generateContent|streamGenerateContent)$/;

/** The model and the kind of call a Gemini path names; undefined for any other call. */
function geminiRoute(request: FastifyRequest): RouteParams | undefined {
  const call = (request.params as { call?: unknown }).call;
  const match = typeof call === 'string' ? GEMINI_CALL.exec(call) : null;
  if (!match) return undefined;
  const query = geminiQuerySchema.safeParse(request.query);
  return {
    model: match[1],
    stream: match[2] === 'streamGenerateContent',
    sse: query.success && query.data.alt === 'sse',
  };
}

export function buildMockLlm(options: MockLlmOptions = {}): { app: FastifyInstance; state: MockLlmState } {
  const state = new MockLlmState({ latencyMs: options.latencyMs, maxRecorded: options.maxRecorded });
  state.chunkMs = options.chunkMs ?? 0;
  const app = Fastify({ logger: false, bodyLimit: BODY_LIMIT_BYTES });

  app.setErrorHandler((error, _request, reply) => {
    const { statusCode, code, message } = errorFields(error);
    const status = statusCode !== undefined && statusCode >= 400 && statusCode < 600 ? statusCode : 500;
    // Body-parser failures (bad JSON, empty body, wrong content type) are the client's.
    const errorCode = code?.startsWith('FST_ERR_CTP')
      ? 'invalid_json'
      : status >= 500
        ? 'internal_error'
        : 'invalid_request';
    return reply.code(status).send(openAiError(message, errorCode));
  });

  app.setNotFoundHandler((request, reply) => sendNotFound(reply, request));

  app.get('/healthz', async () => ({ ok: true }));

  app.get('/v1/models', async () => ({
    object: 'list',
    data: [{ id: 'mock', object: 'model', created: 0, owned_by: 'chatlane' }],
  }));

  app.get('/stats', async (request, reply) => {
    const query = statsQuerySchema.safeParse(request.query);
    if (!query.success) return sendBadRequest(reply, zodMessage(query.error));
    return state.stats(query.data.chatKeyPrefix);
  });

  // Required prefix: a whole mock's worth of chats is not one response.
  app.get('/first-content', async (request, reply) => {
    const query = firstContentQuerySchema.safeParse(request.query);
    if (!query.success) return sendBadRequest(reply, zodMessage(query.error));
    return { firstContentAt: state.firstContentAt(query.data.chatKeyPrefix) };
  });

  app.get('/requests', async (request, reply) => {
    const query = requestsQuerySchema.safeParse(request.query);
    if (!query.success) return sendBadRequest(reply, zodMessage(query.error));
    return state.recorded(query.data.chatKey);
  });

  app.post('/control', async (request, reply) => {
    const parsed = controlSchema.safeParse(request.body);
    if (!parsed.success) return sendBadRequest(reply, zodMessage(parsed.error));
    const control = parsed.data;
    if (control.latencyMs) state.setLatency(control.latencyMs as LatencyRange);
    for (const [chatKey, ms] of Object.entries(control.chatLatencyMs ?? {})) {
      state.setChatLatency(chatKey, ms ?? undefined);
    }
    if (control.laterRequestLatency !== undefined) {
      state.setLaterRequestLatency(control.laterRequestLatency ?? undefined);
    }
    if (control.chunkMs !== undefined) state.chunkMs = control.chunkMs;
    if (control.failNext) state.failNext(control.failNext);
    for (const chatKey of control.hold ?? []) state.hold(chatKey);
    for (const chatKey of control.release ?? []) state.release(chatKey);
    return { ok: true };
  });

  app.post('/reset', async () => {
    state.reset();
    return { ok: true };
  });

  const serve =
    <B>(protocol: Protocol<B>) =>
    async (request: FastifyRequest, reply: FastifyReply) => {
      const params = protocol === gemini ? geminiRoute(request) : {};
      if (params === undefined) return sendNotFound(reply, request);
      const parsed = protocol.schema.safeParse(request.body);
      if (!parsed.success) {
        return reply.code(400).send(protocol.error(zodMessage(parsed.error), 'invalid_request', 400));
      }
      return answer(state, protocol, parsed.data, params, reply);
    };

  app.post('/v1/chat/completions', serve(chatCompletions));
  app.post('/v1/responses', serve(responses));
  app.post('/v1/messages', serve(anthropicMessages));
  // `{model}:generateContent`: one path segment, split by geminiRoute.
  app.post('/v1beta/models/:call', serve(gemini));

  return { app, state };
}

function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}/v1`;
}

export async function startMockLlm(options: MockLlmOptions = {}): Promise<RunningMockLlm> {
  const { app, state } = buildMockLlm(options);
  await app.listen({ host: options.host ?? '127.0.0.1', port: options.port ?? 4010 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') {
    await app.close();
    throw new Error(`mock-llm: unexpected listen address ${String(address)}`);
  }
  let closing: Promise<void> | undefined;
  const close = () => {
    // Held requests would keep the server from draining; let them finish first.
    closing ??= (async () => {
      state.releaseAll();
      await app.close();
    })();
    return closing;
  };
  return { url: urlOf(address), state, close };
}

/** CLI entry: runs until SIGTERM/SIGINT, then resolves once the server has closed. */
export async function runMockLlm(env?: NodeJS.ProcessEnv): Promise<void> {
  const config = loadMockLlmConfig(env);
  const log = createLogger('info', 'mock-llm');
  const server = await startMockLlm({
    host: config.MOCK_LLM_HOST,
    port: config.MOCK_LLM_PORT,
    latencyMs: config.MOCK_LLM_LATENCY_MS,
    chunkMs: config.MOCK_LLM_CHUNK_MS,
  });
  log.info({ url: server.url, latencyMs: config.MOCK_LLM_LATENCY_MS }, 'mock-llm listening');

  await new Promise<void>((resolve, reject) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      log.info({ signal }, 'mock-llm stopping');
      server.close().then(resolve, reject);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  log.info('mock-llm stopped');
}

// `tsx src/mock-llm/server.ts` / `node dist/mock-llm/server.js` run it directly.
const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  runMockLlm().catch((error: unknown) => {
    createLogger('info', 'mock-llm').fatal({ err: error }, 'mock-llm failed to start');
    process.exitCode = 1;
  });
}
