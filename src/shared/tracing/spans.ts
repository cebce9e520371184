import type * as OtelApi from '@opentelemetry/api';
import type { Attributes, Span, TextMapPropagator, Tracer } from '@opentelemetry/api';
import type { Telemetry } from 'bullmq';

/**
 * The spans chatlane's own code opens. The OpenTelemetry API is handed in by the tracing SDK
 * when it starts (./sdk.ts); until then — and for good when tracing is off — every helper
 * here runs the wrapped function directly: no span object, no context switch, no import.
 */
interface Installed {
  api: typeof OtelApi;
  tracer: Tracer;
  bullmq: Telemetry;
  /**
   * W3C trace context, whatever OTEL_PROPAGATORS says: the traceparent chatlane stores with a
   * message or an outbox item is its own record in Redis, read back by its own processes, not
   * a header on the wire.
   */
  stored: TextMapPropagator;
}

let otel: Installed | undefined;

export type { Span };

/** Called by the tracing SDK once it is registered. */
export function installSpans(installed: Installed | undefined): void {
  otel = installed;
}

export interface SpanOptions {
  attributes?: Attributes;
  kind?: 'internal' | 'client' | 'server' | 'producer' | 'consumer';
  /** A W3C traceparent to be the parent (a message's or outbox item's); default: the active span. */
  parent?: string | undefined;
  /** traceparents this span links to (the messages a turn consumed); undefined ones are skipped. */
  links?: ReadonlyArray<string | undefined>;
}

const KINDS = { internal: 0, server: 1, client: 2, producer: 3, consumer: 4 } as const;

function contextOf(o: Installed, traceparent: string | undefined): OtelApi.Context {
  if (traceparent === undefined) return o.api.context.active();
  return o.stored.extract(o.api.ROOT_CONTEXT, { traceparent }, o.api.defaultTextMapGetter);
}

function linksOf(o: Installed, traceparents: ReadonlyArray<string | undefined>): OtelApi.Link[] {
  const out: OtelApi.Link[] = [];
  for (const tp of traceparents) {
    const context = tp && o.api.trace.getSpanContext(contextOf(o, tp));
    if (context) out.push({ context });
  }
  return out;
}

function start(o: Installed, name: string, options: SpanOptions): [Span, OtelApi.Context] {
  const parent = contextOf(o, options.parent);
  const span = o.tracer.startSpan(
    name,
    {
      kind: KINDS[options.kind ?? 'internal'],
      ...(options.attributes && { attributes: options.attributes }),
      ...(options.links && { links: linksOf(o, options.links) }),
    },
    parent,
  );
  return [span, o.api.trace.setSpan(parent, span)];
}

function failed(o: Installed, span: Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: o.api.SpanStatusCode.ERROR, message: (err as Error)?.message ?? String(err) });
  span.end();
}

/** Runs `fn` inside a new span (ended when its promise settles; a rejection marks it failed). */
export function inSpan<T>(
  name: string,
  options: SpanOptions,
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  const o = otel;
  if (!o) return fn(undefined);
  const [span, ctx] = start(o, name, options);
  return o.api.context
    .with(ctx, () => fn(span))
    .then(
      (value) => {
        span.end();
        return value;
      },
      (err: unknown) => {
        failed(o, span, err);
        throw err;
      },
    );
}

/** `inSpan` for synchronous work (the Compressor). */
export function inSpanSync<T>(name: string, options: SpanOptions, fn: (span: Span | undefined) => T): T {
  const o = otel;
  if (!o) return fn(undefined);
  const [span, ctx] = start(o, name, options);
  try {
    const value = o.api.context.with(ctx, () => fn(span));
    span.end();
    return value;
  } catch (err) {
    failed(o, span, err);
    throw err;
  }
}

/** A span that marks a moment in another trace (a message merged into a running turn). */
export function markSpan(name: string, options: SpanOptions): void {
  const o = otel;
  if (o) start(o, name, options)[0].end();
}

/**
 * The W3C traceparent of `span`, or of the active span, to store with what it wrote (a message,
 * an outbox item); undefined when tracing is off or nothing is sampled.
 */
export function traceparent(span?: Span): string | undefined {
  const o = otel;
  if (!o) return undefined;
  const ctx = span ? o.api.trace.setSpan(o.api.ROOT_CONTEXT, span) : o.api.context.active();
  if (!o.api.trace.getSpanContext(ctx)) return undefined;
  const carrier: { traceparent?: string } = {};
  o.stored.inject(ctx, carrier, o.api.defaultTextMapSetter);
  return carrier.traceparent;
}

/**
 * The headers that carry `span`'s context to another service over HTTP, by OTEL_PROPAGATORS
 * (traceparent, tracestate, baggage); none when tracing is off or `none` is configured.
 */
export function propagationHeaders(span: Span | undefined): Record<string, string> {
  const o = otel;
  if (!o || !span) return {};
  const carrier: Record<string, string> = {};
  o.api.propagation.inject(o.api.trace.setSpan(o.api.context.active(), span), carrier);
  return carrier;
}

/** Adds links from `span` to these traceparents (messages merged after the turn began). */
export function addLinks(span: Span | undefined, traceparents: ReadonlyArray<string | undefined>): void {
  const o = otel;
  if (!o || !span) return;
  const links = linksOf(o, traceparents);
  if (links.length > 0) span.addLinks(links);
}

/** BullMQ's `telemetry` option (bullmq-otel): producer and consumer spans around every job. */
export function bullmqTelemetry(): { telemetry: Telemetry } | undefined {
  return otel && { telemetry: otel.bullmq };
}

/** The AI SDK's per-call telemetry option; its spans come from @ai-sdk/otel, registered by ./sdk.ts. */
type ModelTelemetry = {
  telemetry:
    | { isEnabled: true; functionId: string; recordInputs: false; recordOutputs: false }
    | { isEnabled: false };
};

/**
 * The AI SDK's telemetry setting for a model call: its own spans (gen_ai.* attributes) with
 * tracing on, and off entirely without it. Left unset, the SDK builds a telemetry event for
 * every call, step and tool call anyway (a copy of the event with its tools' credentials
 * redacted) and runs each tool inside a tracing-channel wrapper, all for a diagnostics channel
 * nobody listens to: at 2,000 turns in flight the worker allocated 1,222 KiB a turn with it
 * and 1,154 without (docs/benchmarks.md, "Wrapper overhead").
 */
export function modelTelemetry(functionId: string): ModelTelemetry {
  if (!otel) return { telemetry: { isEnabled: false } };
  // Prompts and replies are people's messages: spans carry the model, tokens and timing only.
  return {
    telemetry: { isEnabled: true, functionId, recordInputs: false, recordOutputs: false },
  };
}

/** pino's mixin: trace_id and span_id of the active span on every line written inside one. */
export function logTraceFields(): Record<string, string> {
  const o = otel;
  if (!o) return {};
  const sc = o.api.trace.getSpanContext(o.api.context.active());
  if (!sc || !o.api.isSpanContextValid(sc)) return {};
  return { trace_id: sc.traceId, span_id: sc.spanId, trace_flags: `0${sc.traceFlags.toString(16)}` };
}
