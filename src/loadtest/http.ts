import type { Readable } from 'node:stream';
import { Pool } from 'undici';

/**
 * The load tool's only way out: keep-alive connection pools to the origins it was given,
 * every request counted against one hard budget. No redirects are followed (undici's
 * `request` never does), so nothing but the given URLs is ever contacted.
 */

export class BudgetExhaustedError extends Error {
  override name = 'BudgetExhaustedError';
}

export class RequestBudget {
  used = 0;
  constructor(readonly max: number) {}

  take(): void {
    if (this.used >= this.max) {
      throw new BudgetExhaustedError(`request budget of ${this.max} exhausted (--max-requests)`);
    }
    this.used++;
  }
}

export type HttpOutcome =
  | { ok: true; status: number; body: unknown; ms: number }
  /** `status` is absent when no response came (network error, timeout). */
  | { ok: false; status?: number; code: string; message: string; body?: unknown; ms: number };

export interface HttpClientOptions {
  connections: number;
  timeoutMs: number;
  budget: RequestBudget;
  token?: string | undefined;
}

const errorBody = (body: unknown): { code?: string; message?: string } => {
  if (body && typeof body === 'object' && 'error' in body) {
    const err = (body as { error: unknown }).error;
    if (err && typeof err === 'object') return err as { code?: string; message?: string };
  }
  return {};
};

/** An opened event stream (2xx), or why not. */
export type StreamOutcome =
  | { ok: true; status: number; body: Readable }
  | Extract<HttpOutcome, { ok: false }>;

/** No byte for this long (heartbeats come every 15 s by default) = a dead stream. */
const STREAM_IDLE_MS = 60_000;

function parseBody(text: string): unknown {
  try {
    return text === '' ? undefined : JSON.parse(text);
  } catch {
    return text;
  }
}

/** A non-2xx answer: the error registry's code and message when the body has them. */
function refusal(
  status: number,
  text: string,
  parsed: unknown,
  ms: number,
): Extract<HttpOutcome, { ok: false }> {
  const err = errorBody(parsed);
  return {
    ok: false,
    status,
    code: err.code ?? `HTTP_${status}`,
    message: err.message ?? text.slice(0, 200),
    body: parsed,
    ms,
  };
}

/** No answer (network error, timeout, abort). */
function networkError(err: unknown, started: number): Extract<HttpOutcome, { ok: false }> {
  const e = err as { code?: string; message?: string };
  return {
    ok: false,
    code: e.code ?? 'NETWORK_ERROR',
    message: e.message ?? String(err),
    ms: performance.now() - started,
  };
}

export class HttpClient {
  private readonly pool: Pool;
  /** Long-lived responses (SSE) get their own connections, never the request pool's. */
  private streamPool: Pool | undefined;
  private readonly basePath: string;
  private readonly headers: Record<string, string>;
  inFlight = 0;

  constructor(
    readonly base: URL,
    private readonly opts: HttpClientOptions,
  ) {
    this.pool = new Pool(base.origin, {
      connections: opts.connections,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      connectTimeout: Math.min(opts.timeoutMs, 10_000),
    });
    this.basePath = base.pathname.replace(/\/+$/, '');
    this.headers = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
  }

  /** `path` starts with `/`; it is appended to the base URL's path. Never throws but for the budget. */
  request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<HttpOutcome> {
    return body === undefined
      ? this.requestRaw(method, path, undefined, {})
      : this.requestRaw(method, path, JSON.stringify(body), { 'content-type': 'application/json' });
  }

  /** As `request`, with a body already serialised and headers of the caller's (signatures). */
  async requestRaw(
    method: 'GET' | 'POST',
    path: string,
    body: string | undefined,
    headers: Record<string, string>,
  ): Promise<HttpOutcome> {
    this.opts.budget.take();
    const started = performance.now();
    this.inFlight++;
    try {
      const res = await this.pool.request({
        method,
        path: this.basePath + path,
        headers: { ...this.headers, ...headers },
        ...(body !== undefined && { body }),
      });
      const text = await res.body.text();
      const ms = performance.now() - started;
      const parsed = parseBody(text);
      if (res.statusCode >= 200 && res.statusCode < 300) {
        return { ok: true, status: res.statusCode, body: parsed, ms };
      }
      return refusal(res.statusCode, text, parsed, ms);
    } catch (err) {
      return networkError(err, started);
    } finally {
      this.inFlight--;
    }
  }

  /**
   * `GET path` kept open (Server-Sent Events), on a separate pool without a connection limit:
   * the caller bounds how many it opens. Counts against the budget like any request; never
   * throws but for the budget. The caller ends it through `signal` (or destroys `body`).
   */
  async openStream(
    path: string,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<StreamOutcome> {
    this.opts.budget.take();
    const started = performance.now();
    this.streamPool ??= new Pool(this.base.origin, {
      connections: null,
      pipelining: 1,
      headersTimeout: this.opts.timeoutMs,
      bodyTimeout: Math.max(STREAM_IDLE_MS, this.opts.timeoutMs),
      connectTimeout: Math.min(this.opts.timeoutMs, 10_000),
    });
    try {
      const res = await this.streamPool.request({
        method: 'GET',
        path: this.basePath + path,
        headers: { ...this.headers, accept: 'text/event-stream', ...headers },
        signal,
      });
      if (res.statusCode >= 200 && res.statusCode < 300) {
        return { ok: true, status: res.statusCode, body: res.body };
      }
      const text = await res.body.text().catch(() => '');
      return refusal(res.statusCode, text, parseBody(text), performance.now() - started);
    } catch (err) {
      return networkError(err, started);
    }
  }

  async close(): Promise<void> {
    await this.pool.close().catch(() => undefined);
    // Streams still open are the caller's to end first; whatever is left is cut.
    await this.streamPool?.destroy().catch(() => undefined);
  }
}
