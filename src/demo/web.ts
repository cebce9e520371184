import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, relative } from 'node:path';
import { isValidChatKey } from '../shared/chat-key.js';
import { mintWebToken } from '../shared/web-token.js';

/**
 * The demo's web server for examples/web-chat: the built page, and `GET /token?chat=…`,
 * which mints a browser token for one chat. It stands in for an app's backend, which would
 * check who the user is first; the page then talks to the ingress itself (CORS), with that
 * token, never with API_TOKEN.
 */

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
};

/** The built page, next to dist/ and src/ like the other examples. */
export const WEB_CHAT_DIST = new URL('../../examples/web-chat/dist/', import.meta.url);

export interface WebChatServer {
  url: string;
  close(): Promise<void>;
}

export interface WebChatServerOptions {
  /** The built page (vite's outDir). */
  dir: string;
  /** The ingress the page talks to; asked per request, as it may start after this server. */
  ingressUrl: () => string;
  /** WEB_TOKEN_SECRET, shared with the ingress. */
  secret: string;
  tokenTtlSeconds?: number;
  host?: string;
  port?: number;
}

async function filesUnder(dir: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(`/${relative(dir, path).split('\\').join('/')}`, path);
  }
  return files;
}

export function webChatBuilt(dir: string): boolean {
  return existsSync(join(dir, 'index.html'));
}

export async function startWebChatServer(opts: WebChatServerOptions): Promise<WebChatServer> {
  // Only the files of the build are served, looked up by exact path: nothing else on disk
  // can be reached, whatever the request path holds.
  const files = await filesUnder(opts.dir);
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://page');
    const send = (status: number, type: string, body: string | Buffer) => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'text/plain', 'method not allowed');
    if (url.pathname === '/token') {
      const chat = url.searchParams.get('chat') || `web-${randomBytes(4).toString('hex')}`;
      if (!isValidChatKey(chat))
        return send(
          400,
          'application/json',
          JSON.stringify({ error: { code: 'INVALID_CHAT_KEY', message: `not a chatKey: ${chat}` } }),
        );
      mintWebToken(opts.secret, chat, opts.tokenTtlSeconds ?? 3600).then(
        (token) => send(200, 'application/json', JSON.stringify({ api: opts.ingressUrl(), chat, token })),
        () => send(500, 'text/plain', 'could not mint a token'),
      );
      return;
    }
    const path = files.get(url.pathname === '/' ? '/index.html' : url.pathname);
    if (!path) return send(404, 'text/plain', 'not found');
    readFile(path).then(
      (body) => send(200, TYPES[extname(path)] ?? 'application/octet-stream', body),
      () => send(500, 'text/plain', 'could not read the page'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve);
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
