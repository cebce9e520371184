import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/shared/config.js';
import { tracingSettings } from '../../src/shared/tracing/settings.js';

const settingsOf = (env: Record<string, string>, role = 'worker') => tracingSettings(loadConfig(env), role);

describe('tracing settings from the standard OTEL_* variables', () => {
  it('without an OTLP endpoint tracing is off (no settings, so nothing is started or loaded)', () => {
    expect(settingsOf({})).toBeUndefined();
    // Blank is unset (compose passes ${VAR:-} as an empty string).
    expect(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ', OTEL_SERVICE_NAME: 'x' })).toBeUndefined();
  });

  it('OTEL_EXPORTER_OTLP_ENDPOINT gets /v1/traces appended; the traces endpoint is used as is and wins', () => {
    expect(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })?.url).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(
      settingsOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/otlp/spans',
      })?.url,
    ).toBe('https://traces.example/otlp/spans');
  });

  it('each role reports its own service name unless OTEL_SERVICE_NAME or service.name in OTEL_RESOURCE_ATTRIBUTES says otherwise', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(settingsOf(env, 'ingress')?.serviceName).toBe('chatlane-ingress');
    expect(settingsOf(env, 'delivery')?.serviceName).toBe('chatlane-delivery');
    expect(settingsOf({ ...env, OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attrs' })?.serviceName).toBe(
      'from-attrs',
    );
    expect(
      settingsOf({ ...env, OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attrs', OTEL_SERVICE_NAME: 'named' })
        ?.serviceName,
    ).toBe('named');
  });

  it('protocol (http/protobuf by default, the traces variable wins), headers and resource attributes are read as the spec writes them', () => {
    const s = settingsOf({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-team = chat ',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,k8s.pod.name=a%3Db',
    });
    expect(s?.protocol).toBe('http/json');
    expect(s?.headers).toEqual({ authorization: 'Bearer abc', 'x-team': 'chat' });
    expect(s?.resource).toEqual({ 'deployment.environment': 'prod', 'k8s.pod.name': 'a=b' });
    expect(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })?.protocol).toBe('http/protobuf');
    expect(
      settingsOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      })?.protocol,
    ).toBe('http/protobuf');
  });

  it('sampler: parentbased_always_on by default; the ratio applies to the traceidratio samplers', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(settingsOf(env)).toMatchObject({ sampler: 'parentbased_always_on', ratio: 1 });
    expect(
      settingsOf({
        ...env,
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }),
    ).toMatchObject({ sampler: 'parentbased_traceidratio', ratio: 0.25 });
  });

  it('OTEL_SDK_DISABLED=true turns tracing off even with an endpoint set (so nothing of the SDK starts)', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(settingsOf({ ...env, OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(settingsOf({ ...env, OTEL_SDK_DISABLED: 'false' })?.url).toBe('http://c:4318/v1/traces');
  });

  it('OTEL_PROPAGATORS: tracecontext,baggage by default, in the order given, none for no propagation on the wire', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(settingsOf(env)?.propagators).toEqual(['tracecontext', 'baggage']);
    expect(settingsOf({ ...env, OTEL_PROPAGATORS: 'baggage, tracecontext' })?.propagators).toEqual([
      'baggage',
      'tracecontext',
    ]);
    expect(settingsOf({ ...env, OTEL_PROPAGATORS: 'tracecontext' })?.propagators).toEqual(['tracecontext']);
    expect(settingsOf({ ...env, OTEL_PROPAGATORS: 'none' })?.propagators).toEqual([]);
  });

  it('OTEL_BSP_*: the batch span processor gets the spec defaults, or the values given', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(settingsOf(env)?.batch).toEqual({
      scheduledDelayMillis: 5000,
      exportTimeoutMillis: 30_000,
      maxQueueSize: 2048,
      maxExportBatchSize: 512,
    });
    expect(
      settingsOf({
        ...env,
        OTEL_BSP_SCHEDULE_DELAY: '300',
        OTEL_BSP_EXPORT_TIMEOUT: '2000',
        OTEL_BSP_MAX_QUEUE_SIZE: '100',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '100',
      })?.batch,
    ).toEqual({
      scheduledDelayMillis: 300,
      exportTimeoutMillis: 2000,
      maxQueueSize: 100,
      maxExportBatchSize: 100,
    });
  });

  it('refuses what it cannot honour, naming the variable: grpc, an unknown sampler, a ratio past 1, a header without =', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    for (const [name, value] of [
      ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc'],
      ['OTEL_TRACES_SAMPLER', 'jaeger_remote'],
      ['OTEL_TRACES_SAMPLER_ARG', '1.5'],
      ['OTEL_EXPORTER_OTLP_HEADERS', 'novalue'],
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'not a url'],
      ['OTEL_SDK_DISABLED', 'yes'],
      ['OTEL_PROPAGATORS', 'b3'],
      ['OTEL_PROPAGATORS', 'tracecontext,none'],
      ['OTEL_PROPAGATORS', 'baggage,baggage'],
      ['OTEL_BSP_SCHEDULE_DELAY', '-1'],
      ['OTEL_BSP_SCHEDULE_DELAY', 'soon'],
      ['OTEL_BSP_EXPORT_TIMEOUT', '0'],
      ['OTEL_BSP_MAX_QUEUE_SIZE', '0'],
      ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '1.5'],
      // The SDK would silently cut the batch to the queue size.
      ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '4096'],
    ] as const) {
      expect(() => loadConfig({ ...env, [name]: value }), name).toThrow(ConfigError);
      expect(() => loadConfig({ ...env, [name]: value }), name).toThrow(name);
    }
  });
});
