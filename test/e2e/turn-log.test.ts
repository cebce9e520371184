import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OtlpReceiver } from '../helpers/otlp-receiver.js';
import { postMessage, type RoleProcess } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

/**
 * One `info` line per turn from a worker at the default LOG_LEVEL (info): chat, run, messages,
 * steps, tokens, cached share, time and outcome; with tracing on, the trace id of the turn.
 * Real ingress and worker processes, the mock model, a real OTLP/HTTP receiver.
 */

type Line = Record<string, unknown>;
const INFO = 30;
const turnLines = (proc: RoleProcess): Line[] => proc.logs.filter((l) => l.msg === 'turn ended');

describe('a worker at LOG_LEVEL=info with tracing on', () => {
  const otlp = new OtlpReceiver();
  const stack = useStack('e2e-turn-log', { roles: ['ingress'] });
  let worker: RoleProcess;

  beforeAll(async () => {
    await otlp.start();
    worker = await stack.start('worker', {
      LOG_LEVEL: 'info',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '300',
    });
  }, 60_000);
  afterAll(() => otlp.close());

  it('writes one info line per committed turn (3 turns, 3 lines), each with its turn’s figures and trace_id', async () => {
    const chats = ['log-a', 'log-b', 'log-c'];
    for (const chatKey of chats) await postMessage(stack.ingressUrl(), chatKey, `${chatKey}-1`, 'hello');
    await waitFor(async () => turnLines(worker).length >= 3, { what: 'three turn lines', timeoutMs: 30_000 });
    const lines = turnLines(worker);
    expect(lines).toHaveLength(3);
    expect(lines.map((l) => l.chatKey).sort()).toEqual(chats);
    for (const line of lines) {
      expect(line).toMatchObject({
        level: INFO,
        outcome: 'done',
        messages: 1,
        merged: 0,
        sent: 1,
        runId: expect.any(String),
        jobId: expect.any(String),
        cachedShare: expect.any(Number),
        ms: expect.any(Number),
      });
      expect(line.steps).toBeGreaterThanOrEqual(1);
      expect(line.inputTokens).toBeGreaterThan(0);
      expect(line.outputTokens).toBeGreaterThan(0);
      // The line is the turn's: its trace id is the one of the turn span of the same run.
      const span = await waitFor(
        async () =>
          otlp.spans.find(
            (s) => s.name === 'chatlane.turn' && s.attributes['chatlane.run_id'] === line.runId,
          ),
        { what: `the turn span of ${String(line.chatKey)}`, timeoutMs: 30_000 },
      );
      expect(line.trace_id).toBe(span.traceId);
    }
  }, 60_000);

  it('writes one for a failed turn too, with outcome failed and the code', async () => {
    stack.mock.state.failNext({
      chatKey: 'log-failed',
      count: 1000,
      status: 400,
      message: 'Invalid image data in message 1',
      code: 'invalid_request_error',
    });
    await postMessage(stack.ingressUrl(), 'log-failed', 'f1', 'a broken image');
    const line = await waitFor(async () => turnLines(worker).find((l) => l.chatKey === 'log-failed'), {
      what: 'the failed turn’s line',
      timeoutMs: 30_000,
    });
    expect(line).toMatchObject({ level: INFO, outcome: 'failed', code: 'CONTENT_REJECTED', messages: 1 });
    expect(line.trace_id).toEqual(expect.stringMatching(/^[0-9a-f]{32}$/));
    expect(turnLines(worker).filter((l) => l.chatKey === 'log-failed')).toHaveLength(1);
  }, 60_000);
});

describe('a worker at LOG_LEVEL=info without tracing', () => {
  const stack = useStack('e2e-turn-log-plain', { roles: ['ingress', 'worker'] });

  it('writes the same line, without trace fields', async () => {
    await postMessage(stack.ingressUrl(), 'plain', 'p1', 'hello');
    const worker = stack.procs.find((p) => !p.url)!;
    const line = await waitFor(async () => turnLines(worker)[0], {
      what: 'the turn line',
      timeoutMs: 30_000,
    });
    expect(line).toMatchObject({ level: INFO, chatKey: 'plain', outcome: 'done', messages: 1 });
    expect(line).not.toHaveProperty('trace_id');
  }, 60_000);
});
