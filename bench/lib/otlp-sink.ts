import { createServer } from 'node:http';

/**
 * An OTLP/HTTP endpoint for benchmarks with tracing on: takes every export and throws it away
 * (counting requests and bytes), so what is measured is chatlane's side of tracing — spans,
 * context, serialisation and the POST — not a collector's.
 */
export async function startOtlpSink(): Promise<{
  url: string;
  stats(): { requests: number; bytes: number };
  close(): Promise<void>;
}> {
  let requests = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (c: Buffer) => {
      bytes += c.length;
    });
    req.on('end', () => {
      requests += 1;
      res.writeHead(200, { 'content-type': String(req.headers['content-type'] ?? 'application/x-protobuf') });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    stats: () => ({ requests, bytes }),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
