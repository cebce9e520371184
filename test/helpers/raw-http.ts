import { connect, type Socket } from 'node:net';

export interface RawResponse {
  /** Undefined when the server closed the connection without answering. */
  status?: number;
  headers: Record<string, string>;
  body: string;
  /** Everything the server sent. */
  raw: string;
  /** How the exchange ended. */
  ended: 'closed' | 'complete' | 'timeout';
  /** ms from the last byte written to the end. */
  ms: number;
}

/**
 * One HTTP exchange over a plain socket, with bytes no HTTP client library would send.
 * Resolves when the server closed the connection, when one whole response (by its
 * Content-Length) has arrived (unless `untilClose`), or after `timeoutMs`. `halfClose` sends FIN after the last
 * byte; Node's server then drops a response that is not written yet, so leave it off unless
 * the point is an incomplete request.
 */
export function rawHttp(
  port: number,
  chunks: Array<string | Buffer>,
  {
    timeoutMs = 3000,
    halfClose = false,
    gapMs = 0,
    untilClose = false,
  }: { timeoutMs?: number; halfClose?: boolean; gapMs?: number; untilClose?: boolean } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let wroteAt = Date.now();
    let settled = false;
    const finish = (ended: RawResponse['ended']) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parse(Buffer.concat(received).toString('latin1')), ended, ms: Date.now() - wroteAt });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    socket.on('data', (d) => {
      received.push(d);
      const parsed = parse(Buffer.concat(received).toString('latin1'));
      const length = Number(parsed.headers['content-length']);
      if (
        !untilClose &&
        parsed.status !== undefined &&
        Number.isFinite(length) &&
        Buffer.byteLength(parsed.body, 'latin1') >= length
      )
        finish('complete');
    });
    socket.on('close', () => finish('closed'));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // A server that closes on us mid-write (EPIPE, ECONNRESET) has still answered or not.
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE') finish('closed');
      else if (!settled) reject(err);
    });
    socket.on('connect', async () => {
      for (const chunk of chunks) {
        if (socket.destroyed) return;
        socket.write(chunk);
        if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
      }
      wroteAt = Date.now();
      if (halfClose && !socket.destroyed) socket.end();
    });
  });
}

function parse(raw: string): Omit<RawResponse, 'ended' | 'ms'> {
  const headerEnd = raw.indexOf('\r\n\r\n');
  if (headerEnd < 0) return { headers: {}, body: '', raw };
  const [statusLine, ...lines] = raw.slice(0, headerEnd).split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  // The first response only: a pipelined request may be answered right after it.
  const length = Number(headers['content-length']);
  const rest = raw.slice(headerEnd + 4);
  const body = Number.isFinite(length)
    ? Buffer.from(rest, 'latin1').subarray(0, length).toString('latin1')
    : rest;
  return { status: Number.isFinite(status) ? status : undefined, headers, body, raw };
}
