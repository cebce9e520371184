import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The skeleton every fake platform API shares: a real HTTP server on 127.0.0.1:0 that
 * records each request and answers from a per-route script (one-shot answers queued by a
 * test, e.g. a 429 with Retry-After) or the fake's default handler. Platform fakes
 * (fake-slack.ts, fake-whatsapp.ts, fake-discord.ts) only describe their routes.
 */
export interface RecordedCall {
  method: string;
  /** Path without the query string. */
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  raw: string;
  /** JSON or form bodies as an object; anything else as `{}`. */
  body: Record<string, unknown>;
  at: number;
}

export interface FakeAnswer {
  status?: number;
  headers?: Record<string, string>;
  body?: unknown;
}

export type FakeHandler = (call: RecordedCall) => FakeAnswer;

export interface FakePlatform {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly calls: RecordedCall[];
  /** Calls whose path matches (string = exact, RegExp = test). */
  callsTo(path: string | RegExp): RecordedCall[];
  /** Answer the next call to `path` this way (queued: one answer per call, in order). */
  scriptNext(path: string | RegExp, answer: FakeAnswer): void;
  /**
   * The next call to `path` for which `when` holds goes to `take` instead of being answered:
   * recorded in `calls`, but neither scripted nor handled (the platform never accepted it).
   * `take` gets the raw response, to answer late, or never (a test kills the caller meanwhile).
   */
  hold(
    path: string | RegExp,
    when: (call: RecordedCall) => boolean,
    take: (res: ServerResponse) => Promise<void>,
  ): void;
  close(): Promise<void>;
}

function parseBody(raw: string, contentType: string | undefined): Record<string, unknown> {
  if (!raw) return {};
  if (contentType?.includes('application/x-www-form-urlencoded')) {
    return Object.fromEntries(new URLSearchParams(raw));
  }
  try {
    const parsed: unknown = JSON.parse(raw);
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

const matches = (pattern: string | RegExp, path: string) =>
  typeof pattern === 'string' ? pattern === path : pattern.test(path);

async function readAll(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startFakePlatform(fallback: FakeHandler): Promise<FakePlatform> {
  const calls: RecordedCall[] = [];
  const scripted: { pattern: string | RegExp; answer: FakeAnswer }[] = [];
  const held: {
    pattern: string | RegExp;
    when: (call: RecordedCall) => boolean;
    take: (res: ServerResponse) => Promise<void>;
  }[] = [];

  const server: Server = createServer((req, res) => {
    void (async () => {
      const raw = await readAll(req);
      const url = new URL(req.url ?? '/', 'http://fake');
      const call: RecordedCall = {
        method: req.method ?? 'GET',
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        raw,
        body: parseBody(raw, req.headers['content-type']),
        at: Date.now(),
      };
      calls.push(call);
      const h = held.findIndex((x) => matches(x.pattern, call.path) && x.when(call));
      if (h >= 0) {
        await held.splice(h, 1)[0]!.take(res);
        return;
      }
      const i = scripted.findIndex((s) => matches(s.pattern, call.path));
      const answer = i >= 0 ? scripted.splice(i, 1)[0]!.answer : fallback(call);
      const body = answer.body === undefined ? '' : JSON.stringify(answer.body);
      res.writeHead(answer.status ?? 200, { 'content-type': 'application/json', ...answer.headers });
      res.end(body);
    })().catch((err: unknown) => {
      res.writeHead(500);
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    callsTo: (path) => calls.filter((c) => matches(path, c.path)),
    scriptNext: (pattern, answer) => {
      scripted.push({ pattern, answer });
    },
    hold: (pattern, when, take) => {
      held.push({ pattern, when, take });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
