import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { type Instrumentation, registerInstrumentations } from '@opentelemetry/instrumentation';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { BullMQOtel } from 'bullmq-otel';
import { interceptModules } from './hooks.js';
import type { TracingSettings } from './settings.js';
import { installSpans } from './spans.js';

/**
 * The tracing SDK of one process, loaded (by ./start.ts) only when an OTLP endpoint is set.
 * Everything is configured from `TracingSettings`, never from the environment directly.
 */

export interface RunningTracing {
  /** The exporter spans go to (tests check its kind). */
  exporter: SpanExporter;
  /** Sends what is buffered, then stops: called on shutdown. */
  shutdown(): Promise<void>;
}

async function exporterFor(settings: TracingSettings): Promise<SpanExporter> {
  const options = { url: settings.url, headers: settings.headers };
  if (settings.protocol === 'http/json') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    return new OTLPTraceExporter(options);
  }
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
  return new OTLPTraceExporter(options);
}

/**
 * BullMQ's housekeeping (each fetch of the next job, the stalled-jobs check, pauses and
 * closes) would otherwise make a trace of its own every few seconds per worker; only the
 * spans that carry a job (add, process) are of interest.
 */
const BULLMQ_HOUSEKEEPING =
  /^(getNextJob|moveStalledJobsToWait|startStalledCheckTimer|rateLimit|pause|resume|close)( |$)/;

function samplerFor(settings: TracingSettings): Sampler {
  const ratio = new TraceIdRatioBasedSampler(settings.ratio);
  const chosen: Sampler = {
    always_on: () => new AlwaysOnSampler(),
    always_off: () => new AlwaysOffSampler(),
    traceidratio: () => ratio,
    parentbased_always_on: () => new ParentBasedSampler({ root: new AlwaysOnSampler() }),
    parentbased_always_off: () => new ParentBasedSampler({ root: new AlwaysOffSampler() }),
    parentbased_traceidratio: () => new ParentBasedSampler({ root: ratio }),
  }[settings.sampler]();
  return {
    shouldSample: (context, traceId, name, kind, attributes, links) =>
      BULLMQ_HOUSEKEEPING.test(name)
        ? { decision: SamplingDecision.NOT_RECORD }
        : chosen.shouldSample(context, traceId, name, kind, attributes, links),
    toString: () => `chatlane(${chosen.toString()})`,
  };
}

/** The roles that call a model (the AI SDK is loaded only there). */
const callsModels = (role: string) => role === 'worker' || role === 'compactor' || role === 'all';

/**
 * The AI SDK's own spans (AI SDK 7: the @ai-sdk/otel integration, registered once for every
 * call): the call, each step with gen_ai.* (model, tokens), each tool call, MCP tools included.
 */
async function registerModelTelemetry(provider: TracerProvider): Promise<void> {
  const [{ OpenTelemetry }, { registerTelemetry }] = await Promise.all([
    import('@ai-sdk/otel'),
    import('ai'),
  ]);
  // The tracer is handed over: @ai-sdk/otel pins its own copy of @opentelemetry/api.
  registerTelemetry(new OpenTelemetry({ tracer: provider.getTracer('gen_ai'), agentSpanName: 'functionId' }));
}

function instrumentationsFor(role: string): Promise<Instrumentation[]> {
  const list: Instrumentation[] = [
    // Only commands inside a span of ours: BullMQ's blocking polls would be traces of their own.
    new IORedisInstrumentation({ requireParentSpan: true }),
    new UndiciInstrumentation(),
  ];
  // fastify exists only in the roles that serve the HTTP API.
  if (role !== 'ingress' && role !== 'all') return Promise.resolve(list);
  return import('@fastify/otel').then(({ FastifyOtelInstrumentation }) => [
    ...list,
    new FastifyOtelInstrumentation({
      registerOnInitialization: true,
      // One span per request: a span per lifecycle hook and handler tripled the ingress's CPU per request.
      instrumentHooks: false,
      instrumentHandler: false,
      // Named by route ("POST /webhooks/generic/:source") rather than "request".
      requestHook: (span, request) => span.updateName(`${request.method} ${request.routeOptions.url ?? ''}`),
    }) as unknown as Instrumentation,
  ]);
}

/** OTEL_PROPAGATORS as one propagator (an empty composite for `none`: nothing injected or read). */
function propagatorFor(settings: TracingSettings): api.TextMapPropagator {
  const of = { tracecontext: W3CTraceContextPropagator, baggage: W3CBaggagePropagator };
  return new CompositePropagator({ propagators: settings.propagators.map((name) => new of[name]()) });
}

export async function startSdk(settings: TracingSettings): Promise<RunningTracing> {
  await interceptModules(['ioredis']);
  const exporter = await exporterFor(settings);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ ...settings.resource, 'service.name': settings.serviceName }),
    sampler: samplerFor(settings),
    // OTEL_BSP_*; shutdown() still flushes every buffered span, whatever the delay.
    spanProcessors: [new BatchSpanProcessor({ exporter, ...settings.batch })],
  });
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.propagation.setGlobalPropagator(propagatorFor(settings));
  api.trace.setGlobalTracerProvider(provider);
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: await instrumentationsFor(settings.role),
  });
  if (callsModels(settings.role)) await registerModelTelemetry(provider);
  installSpans({
    api,
    tracer: provider.getTracer('chatlane'),
    bullmq: new BullMQOtel({ tracerName: 'bullmq' }),
    stored: new W3CTraceContextPropagator(),
  });
  return {
    exporter,
    shutdown: async () => {
      installSpans(undefined);
      await provider.shutdown();
    },
  };
}
