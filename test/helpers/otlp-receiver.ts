import { createServer, type Server } from 'node:http';

/** One span as the receiver decoded it from OTLP/HTTP JSON. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string }>;
  /** When the span ended (its endTimeUnixNano, in ms). */
  endMs: number;
  /** When the export that carried it arrived (Date.now() of the receiver). */
  receivedAt: number;
}

interface AnyValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
type KeyValue = { key: string; value: AnyValue };

const decodeValue = (v: AnyValue): unknown =>
  v.stringValue ??
  (v.intValue !== undefined ? Number(v.intValue) : undefined) ??
  v.doubleValue ??
  v.boolValue ??
  v.arrayValue?.values?.map(decodeValue);

const attributesOf = (list: KeyValue[] | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map((a) => [a.key, decodeValue(a.value)]));

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        attributes?: KeyValue[];
        links?: Array<{ traceId: string; spanId: string }>;
        endTimeUnixNano?: string | number;
      }>;
    }>;
  }>;
}

/**
 * A real OTLP/HTTP trace receiver: POST /v1/traces. JSON bodies (http/json) are decoded into
 * `spans`; protobuf bodies (http/protobuf) are counted with their content type, not decoded.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Every export request: its content type and the headers the exporter sent. */
  readonly requests: Array<{
    contentType: string;
    headers: Record<string, unknown>;
    bytes: number;
    receivedAt: number;
  }> = [];
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = Buffer.concat(chunks);
      const contentType = String(req.headers['content-type'] ?? '');
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const receivedAt = Date.now();
      this.requests.push({ contentType, headers: { ...req.headers }, bytes: body.length, receivedAt });
      if (contentType.startsWith('application/json'))
        this.decode(JSON.parse(body.toString('utf8')), receivedAt);
      res.writeHead(200, { 'content-type': contentType }).end(contentType.includes('json') ? '{}' : '');
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  private decode(request: ExportRequest, receivedAt: number): void {
    for (const rs of request.resourceSpans ?? []) {
      const service = String(attributesOf(rs.resource?.attributes)['service.name'] ?? '');
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            name: s.name,
            kind: s.kind ?? 0,
            attributes: attributesOf(s.attributes),
            links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
            endMs: Number(BigInt(s.endTimeUnixNano ?? 0) / 1_000_000n),
            receivedAt,
          });
        }
      }
    }
  }

  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  close(): Promise<void> {
    this.server?.closeAllConnections();
    return new Promise((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
