import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OtlpReceiver } from '../helpers/otlp-receiver.js';
import { postMessage, type RoleProcess } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

/**
 * The batch span processor follows the standard OTEL_BSP_* variables: a short schedule delay
 * exports a running worker's spans soon after they end, and a long one still sends every
 * buffered span at graceful shutdown. Real processes, a real OTLP/HTTP receiver (JSON).
 */

const otelEnv = (otlp: OtlpReceiver, service: string) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_SERVICE_NAME: service,
});

const turnSpan = (otlp: OtlpReceiver, service: string, chatKey: string) =>
  otlp.spans.find(
    (s) =>
      s.service === service && s.name === 'chatlane.turn' && s.attributes['chatlane.chat_key'] === chatKey,
  );

const running = (proc: RoleProcess) => proc.child.exitCode === null && proc.child.signalCode === null;

describe('OTEL_BSP_SCHEDULE_DELAY=300: a running worker exports a turn within a second of its end', () => {
  const otlp = new OtlpReceiver();
  const stack = useStack('e2e-bsp-fast', { roles: ['ingress'] });
  let worker: RoleProcess;

  beforeAll(async () => {
    await otlp.start();
    worker = await stack.start('worker', { ...otelEnv(otlp, 'bsp-fast'), OTEL_BSP_SCHEDULE_DELAY: '300' });
  }, 60_000);
  afterAll(() => otlp.close());

  it('the turn span arrives while the worker runs, at most 1 s after the span ended (the default delay is 5 s)', async () => {
    await postMessage(stack.ingressUrl(), 'bsp-fast', 'm1', 'hello');
    const span = await waitFor(async () => turnSpan(otlp, 'bsp-fast', 'bsp-fast'), {
      what: 'the turn span',
      timeoutMs: 30_000,
    });
    expect(running(worker)).toBe(true);
    expect(span.endMs).toBeGreaterThan(0);
    expect(span.receivedAt - span.endMs).toBeLessThan(1000);
  }, 60_000);
});

describe('OTEL_BSP_SCHEDULE_DELAY=600000: nothing is exported while the worker runs, everything at graceful shutdown', () => {
  const otlp = new OtlpReceiver();
  const stack = useStack('e2e-bsp-slow', { roles: ['ingress'] });
  let worker: RoleProcess;

  beforeAll(async () => {
    await otlp.start();
    worker = await stack.start('worker', { ...otelEnv(otlp, 'bsp-slow'), OTEL_BSP_SCHEDULE_DELAY: '600000' });
  }, 60_000);
  afterAll(() => otlp.close());

  it('holds the committed turn’s spans until SIGTERM, then flushes them before it exits', async () => {
    await postMessage(stack.ingressUrl(), 'bsp-slow', 'm1', 'hello');
    await waitFor(
      async () => (await stack.store.readHistory('bsp-slow')).some((m) => m.role === 'assistant'),
      {
        what: 'the turn committed',
        timeoutMs: 30_000,
      },
    );
    // Past the 5 s default, so a delay that was ignored would have exported by now.
    await new Promise((r) => setTimeout(r, 6000));
    expect(otlp.requests).toHaveLength(0);
    await worker.kill('SIGTERM');
    expect(worker.child.exitCode).toBe(0);
    expect(turnSpan(otlp, 'bsp-slow', 'bsp-slow')).toBeDefined();
  }, 60_000);
});
