import { z } from 'zod';
import { flag, int, nameList, optionalString, otelPairs } from './config-values.js';

/**
 * The standard OpenTelemetry variables (docs/tracing.md), parsed in config.ts like every other
 * variable and read nowhere else: the tracing SDK gets them through `tracingSettings`. With
 * neither endpoint set, or OTEL_SDK_DISABLED=true, tracing is off and no tracing SDK module
 * is loaded. A function, not a constant: the schemas are built for the one parse at boot.
 */

/** The propagators chatlane can install (OTEL_PROPAGATORS); `none` installs none. */
export const OTEL_PROPAGATORS = ['tracecontext', 'baggage', 'none'] as const;
export type OtelPropagator = Exclude<(typeof OTEL_PROPAGATORS)[number], 'none'>;

/** The spec's default: W3C trace context and W3C baggage. */
const DEFAULT_PROPAGATORS: OtelPropagator[] = ['tracecontext', 'baggage'];

/** `tracecontext,baggage` (or `none`): the propagators to install, in order, without repeats. */
const propagatorList = nameList(
  /^(tracecontext|baggage|none)$/,
  `a propagator chatlane supports (${OTEL_PROPAGATORS.join(', ')})`,
).transform((names, ctx): OtelPropagator[] => {
  if (names.length === 0) return [...DEFAULT_PROPAGATORS];
  if (names.includes('none') && names.length > 1)
    ctx.addIssue({ code: 'custom', message: "'none' cannot be listed with other propagators" });
  return names.filter((n): n is OtelPropagator => n !== 'none');
});

export const otelShape = () => ({
  OTEL_SDK_DISABLED: flag('false').describe(
    'true turns tracing off even with an OTLP endpoint set: no tracing SDK is loaded and no exporter started',
  ),
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalString
    .pipe(z.string().url().optional())
    .describe(
      'OTLP/HTTP collector base URL; traces go to <url>/v1/traces. Unset (and the next one unset): tracing off',
    ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalString
    .pipe(z.string().url().optional())
    .describe('Full OTLP/HTTP URL for traces, used as is; wins over OTEL_EXPORTER_OTLP_ENDPOINT'),
  OTEL_EXPORTER_OTLP_PROTOCOL: z
    .enum(['http/protobuf', 'http/json'])
    .default('http/protobuf')
    .describe('OTLP encoding over HTTP: http/protobuf or http/json (grpc is not supported)'),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z
    .enum(['http/protobuf', 'http/json'])
    .optional()
    .describe('OTLP encoding for traces only; wins over OTEL_EXPORTER_OTLP_PROTOCOL'),
  OTEL_EXPORTER_OTLP_HEADERS: otelPairs.describe(
    'Headers sent with every OTLP export, key=value pairs separated by commas (values URL-encoded)',
  ),
  OTEL_SERVICE_NAME: optionalString.describe(
    'service.name of every span of this process (default: chatlane-<role>, e.g. chatlane-worker)',
  ),
  OTEL_RESOURCE_ATTRIBUTES: otelPairs.describe(
    'Extra resource attributes on every span, key=value pairs separated by commas (e.g. deployment.environment=prod)',
  ),
  OTEL_TRACES_SAMPLER: z
    .enum([
      'always_on',
      'always_off',
      'traceidratio',
      'parentbased_always_on',
      'parentbased_always_off',
      'parentbased_traceidratio',
    ])
    .default('parentbased_always_on')
    .describe('Which traces are recorded: always_on, always_off, traceidratio or their parentbased_ forms'),
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number()
    .min(0)
    .max(1)
    .optional()
    .describe('The ratio (0..1) of the traceidratio samplers (default 1)'),
  OTEL_PROPAGATORS: propagatorList.describe(
    'Context propagators on the wire (HTTP headers, BullMQ jobs): tracecontext, baggage, or none; default tracecontext,baggage',
  ),
  // The batch span processor (the spec's names and defaults). A short delay makes a short-lived
  // process or a test export sooner; every buffered span is sent at graceful shutdown anyway.
  OTEL_BSP_SCHEDULE_DELAY: int(5000, 0).describe('milliseconds between two exports of buffered spans'),
  OTEL_BSP_EXPORT_TIMEOUT: int(30_000, 1).describe('longest one export may take, in milliseconds'),
  OTEL_BSP_MAX_QUEUE_SIZE: int(2048, 1).describe(
    'spans buffered at most; spans ended while it is full are dropped',
  ),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: int(512, 1).describe(
    'spans sent in one export at most (not above OTEL_BSP_MAX_QUEUE_SIZE)',
  ),
});

/** Cross-variable rules of the OTel group: each line names the variable to fix. */
export function otelProblems(config: {
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: number;
  OTEL_BSP_MAX_QUEUE_SIZE: number;
}): string[] {
  // The SDK would silently cut the batch to the queue; an operator who wrote both means something else.
  return config.OTEL_BSP_MAX_EXPORT_BATCH_SIZE > config.OTEL_BSP_MAX_QUEUE_SIZE
    ? [
        `  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must not exceed OTEL_BSP_MAX_QUEUE_SIZE (${config.OTEL_BSP_MAX_QUEUE_SIZE})`,
      ]
    : [];
}
