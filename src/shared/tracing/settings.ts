import type { Config } from '../config.js';
import type { OtelPropagator } from '../config-otel.js';

/** What the tracing SDK is started with: the OTEL_* variables as src/shared/config.ts read them. */
export interface TracingSettings {
  /** Where spans are POSTed (the full OTLP/HTTP traces URL). */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES; service.name is `serviceName`'s. */
  resource: Record<string, string>;
  sampler: Config['OTEL_TRACES_SAMPLER'];
  /** The ratio of the traceidratio samplers (1 when unset). */
  ratio: number;
  /** OTEL_PROPAGATORS: what goes on the wire (HTTP headers, BullMQ jobs); empty for `none`. */
  propagators: OtelPropagator[];
  /** OTEL_BSP_*: the batch span processor. */
  batch: {
    scheduledDelayMillis: number;
    exportTimeoutMillis: number;
    maxQueueSize: number;
    maxExportBatchSize: number;
  };
  /** The role(s) of this process: which instrumentations it needs (fastify only where an HTTP API runs). */
  role: string;
}

/**
 * The tracing settings of a process of `role`, or undefined when no OTLP endpoint is set or
 * OTEL_SDK_DISABLED is true: tracing is then off and nothing of the tracing SDK is loaded.
 */
export function tracingSettings(
  config: Pick<
    Config,
    | 'OTEL_SDK_DISABLED'
    | 'OTEL_EXPORTER_OTLP_ENDPOINT'
    | 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
    | 'OTEL_EXPORTER_OTLP_PROTOCOL'
    | 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    | 'OTEL_EXPORTER_OTLP_HEADERS'
    | 'OTEL_SERVICE_NAME'
    | 'OTEL_RESOURCE_ATTRIBUTES'
    | 'OTEL_TRACES_SAMPLER'
    | 'OTEL_TRACES_SAMPLER_ARG'
    | 'OTEL_PROPAGATORS'
    | 'OTEL_BSP_SCHEDULE_DELAY'
    | 'OTEL_BSP_EXPORT_TIMEOUT'
    | 'OTEL_BSP_MAX_QUEUE_SIZE'
    | 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'
  >,
  role: string,
): TracingSettings | undefined {
  if (config.OTEL_SDK_DISABLED) return undefined;
  const url =
    config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (config.OTEL_EXPORTER_OTLP_ENDPOINT &&
      `${config.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`);
  if (!url) return undefined;
  // The spec's order: OTEL_SERVICE_NAME, then service.name in OTEL_RESOURCE_ATTRIBUTES, then ours.
  const serviceName =
    config.OTEL_SERVICE_NAME ?? config.OTEL_RESOURCE_ATTRIBUTES['service.name'] ?? `chatlane-${role}`;
  return {
    url,
    protocol: config.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? config.OTEL_EXPORTER_OTLP_PROTOCOL,
    headers: config.OTEL_EXPORTER_OTLP_HEADERS,
    serviceName,
    resource: config.OTEL_RESOURCE_ATTRIBUTES,
    sampler: config.OTEL_TRACES_SAMPLER,
    ratio: config.OTEL_TRACES_SAMPLER_ARG ?? 1,
    propagators: config.OTEL_PROPAGATORS,
    batch: {
      scheduledDelayMillis: config.OTEL_BSP_SCHEDULE_DELAY,
      exportTimeoutMillis: config.OTEL_BSP_EXPORT_TIMEOUT,
      maxQueueSize: config.OTEL_BSP_MAX_QUEUE_SIZE,
      maxExportBatchSize: config.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
    },
    role,
  };
}
