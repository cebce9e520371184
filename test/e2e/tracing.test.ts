import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { postMessage, type RoleProcess } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';
import { crmSourceEnv, signedHeaders, webhookSecret } from '../helpers/webhooks.js';

const SECRET = webhookSecret();
const SERVER = 2;
const CLIENT = 3;

/** The user's system behind replyTo: takes every reply. */
async function replyReceiver(): Promise<{
  url: string;
  texts: string[];
  traceparents: Array<string | undefined>;
  server: Server;
}> {
  const texts: string[] = [];
  const traceparents: Array<string | undefined> = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    texts.push((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { text: string }).text);
    traceparents.push(req.headers.traceparent as string | undefined);
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/replies`;
  return { url, texts, traceparents, server };
}

/** The span's ancestors within its trace, nearest first. */
function ancestors(spans: ReceivedSpan[], span: ReceivedSpan): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (let s = span; s.parentSpanId; ) {
    const parent = spans.find((p) => p.spanId === s.parentSpanId);
    if (!parent) break;
    out.push(parent);
    s = parent;
  }
  return out;
}

describe('one trace from a signed webhook to the model and the delivery POST (OTLP/HTTP JSON, three processes)', () => {
  const otlp = new OtlpReceiver();
  let replies: Awaited<ReturnType<typeof replyReceiver>>;
  let ingress: RoleProcess;
  let worker: RoleProcess;
  const stack = useStack('e2e-tracing', {
    roles: [],
    // Replies go out through the delivery process, not the worker.
    env: crmSourceEnv(SECRET),
  });

  beforeAll(async () => {
    await otlp.start();
    replies = await replyReceiver();
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-tenant=chat%20lane',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=e2e',
    };
    ingress = await stack.start('ingress', otel);
    // At the default level: the turn's own line ('turn ended') is written inside its span.
    worker = await stack.start('worker', otel);
    await stack.start('delivery', otel);
  }, 60_000);

  afterAll(async () => {
    replies?.server.closeAllConnections();
    replies?.server.close();
    await otlp.close();
  });

  it('holds the ingress request span, the turn span in the worker, a model call with gen_ai.* attributes and the delivery POST client span; worker log lines carry its trace_id', async () => {
    const payload = JSON.stringify({ chatKey: 'traced', text: 'hello', replyTo: { url: replies.url } });
    const res = await fetch(`${ingress.url}/webhooks/generic/crm`, {
      method: 'POST',
      headers: signedHeaders(SECRET, payload),
      body: payload,
    });
    expect(res.status).toBe(202);
    await waitFor(async () => replies.texts.length === 1, { what: 'the reply delivered' });

    const request = await waitFor(
      async () =>
        otlp.spans.find(
          (s) =>
            s.service === 'chatlane-ingress' &&
            s.kind === SERVER &&
            s.name === 'POST /webhooks/generic/:source' &&
            s.attributes['url.path'] === '/webhooks/generic/crm',
        ),
      { what: 'the ingress request span' },
    );
    const { traceId } = request;
    const clientPost = await waitFor(
      async () =>
        otlp
          .trace(traceId)
          .find(
            (s) =>
              s.service === 'chatlane-delivery' &&
              s.kind === CLIENT &&
              String(s.attributes['url.full']) === replies.url,
          ),
      { what: 'the delivery POST in the same trace', timeoutMs: 30_000 },
    );
    // Each process exports on its own schedule: wait until the worker's last spans are in too.
    const trace = await waitFor(
      async () => {
        const spans = otlp.trace(traceId);
        const ended = ['chatlane.turn', 'chatlane.commit', 'step 2'].every((n) =>
          spans.some((s) => s.name === n),
        );
        return ended && spans.some((s) => s.name.startsWith('invoke_agent')) && spans;
      },
      { what: "the worker's spans in the same trace", timeoutMs: 30_000 },
    );

    // The ingest script is a child of the request.
    const ingest = trace.find((s) => s.name === 'chatlane.ingest')!;
    expect(ancestors(trace, ingest)).toContain(request);
    expect(trace.some((s) => s.parentSpanId === ingest.spanId && /evalsha|eval/i.test(s.name))).toBe(true);

    const turn = trace.find((s) => s.name === 'chatlane.turn');
    expect(turn?.service).toBe('chatlane-worker');
    expect(turn?.attributes['chatlane.chat_key']).toBe('traced');
    // Its link reaches the message it consumed.
    expect(turn?.links).toContainEqual({ traceId, spanId: ingest.spanId });
    for (const stage of [
      'chatlane.provider',
      'chatlane.compressor',
      'chatlane.assembler',
      'chatlane.commit',
    ]) {
      expect(trace.find((s) => s.name === stage)?.parentSpanId, stage).toBe(turn!.spanId);
    }

    // The AI SDK's own spans (@ai-sdk/otel): the call, its steps, each model call and tool call.
    const modelCall = trace.find(
      (s) => s.kind === CLIENT && s.attributes['gen_ai.operation.name'] === 'chat',
    );
    expect(modelCall?.service).toBe('chatlane-worker');
    expect(ancestors(trace, modelCall!).some((s) => s.name.startsWith('step '))).toBe(true);
    expect(trace.some((s) => s.attributes['gen_ai.tool.name'] === 'chat_send')).toBe(true);
    expect(modelCall?.attributes['gen_ai.request.model']).toBe('mock');
    expect(Number(modelCall?.attributes['gen_ai.usage.input_tokens'])).toBeGreaterThan(0);
    expect(ancestors(trace, modelCall!)).toContain(turn);

    const attempt = ancestors(trace, clientPost)[0];
    expect(attempt?.name).toBe('chatlane.delivery.attempt');
    expect(attempt?.attributes['chatlane.delivery.result']).toBe('ok');
    expect(clientPost.attributes['http.request.method']).toBe('POST');
    // The receiver got the POST's context (OTEL_PROPAGATORS, tracecontext by default) to continue the trace.
    expect(replies.traceparents[0]).toBe(`00-${traceId}-${clientPost.spanId}-01`);

    // Standard OTEL variables reached the exporter and the resource.
    expect(otlp.requests.every((r) => r.contentType.startsWith('application/json'))).toBe(true);
    expect(otlp.requests.some((r) => r.headers['x-tenant'] === 'chat lane')).toBe(true);

    const traced = worker.logs.filter((l) => l.trace_id === traceId);
    expect(traced.length).toBeGreaterThan(0);
    // The turn's bindings stay beside the trace fields.
    const committed = traced.find((l) => l.msg === 'turn ended' && l.outcome === 'done');
    expect(committed).toMatchObject({ chatKey: 'traced', runId: turn?.attributes['chatlane.run_id'] });
    expect(trace.some((s) => s.spanId === committed?.span_id)).toBe(true);
  }, 60_000);

  it('a message merged into a running turn: the turn links to it and its own trace links to the turn', async () => {
    stack.mock.state.hold('merged');
    await postMessage(ingress.url!, 'merged', 'm1', 'book a table');
    await stack.mock.state.waitForRequest('merged', 1);
    await postMessage(ingress.url!, 'merged', 'm2', 'for four people');
    stack.mock.state.release('merged');

    const ingestOf = (id: string) =>
      waitFor(
        async () =>
          otlp.spans.find((s) => s.name === 'chatlane.ingest' && s.attributes['chatlane.message_id'] === id),
        {
          what: `the ingest span of ${id}`,
        },
      );
    const first = await ingestOf('m1');
    const second = await ingestOf('m2');
    expect(second.traceId).not.toBe(first.traceId);
    const turn = await waitFor(
      async () =>
        otlp.spans.find(
          (s) =>
            s.name === 'chatlane.turn' &&
            s.attributes['chatlane.chat_key'] === 'merged' &&
            s.links.some((l) => l.spanId === second.spanId),
        ),
      { what: 'the turn linking to the merged message', timeoutMs: 30_000 },
    );
    expect(turn.traceId).toBe(first.traceId);
    expect(turn.links).toContainEqual({ traceId: first.traceId, spanId: first.spanId });
    const mark = await waitFor(
      async () => otlp.trace(second.traceId).find((s) => s.name === 'chatlane.message.merged'),
      { what: "the merged message's trace linking to the turn" },
    );
    expect(mark.parentSpanId).toBe(second.spanId);
    expect(mark.links).toEqual([{ traceId: turn.traceId, spanId: turn.spanId }]);
  }, 60_000);
});
