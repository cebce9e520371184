import { chmod, chown, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import { connect, isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { addressProblem, guardLookup, type ResolveAll } from '../../shared/address-policy.js';
import type { AllowedHost } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { hostMatches } from '../../shared/webhooks/reply-url.js';

/**
 * EXEC_SHELL_NETWORK: the only way out of a sandbox. A sandbox has no network interface but
 * its own loopback, so nothing inside can open a connection to anywhere. When the operator
 * names hosts, this HTTP proxy runs in the worker, outside every sandbox, on a unix socket
 * that is mounted into each sandbox; inside, socat bridges 127.0.0.1:3128 to it and
 * HTTP(S)_PROXY point there, which curl, pip, npm, git and most HTTP clients follow.
 *
 * The proxy answers CONNECT (https and any TLS) and absolute-form plain HTTP requests, only for
 * a host:port on the list, resolving the name itself and refusing it when it resolves to a
 * private, loopback, link-local or metadata address (the check runs on the addresses the
 * socket connects to: a listed name pointed at 127.0.0.1 does not reach Redis). Anything
 * else gets 403; a client that ignores the proxy variables reaches nothing at all.
 */
export interface NetworkProxyOptions {
  allowed: AllowedHost[];
  /** Where the socket is made. */
  socketPath: string;
  /** The host user sandboxes run as: the socket is theirs alone (mode 0600). */
  uid: number | undefined;
  logger: Logger;
  /** Tests: host name resolution and which addresses are refused. */
  resolve?: ResolveAll;
  /** Why an address is refused, or undefined (default: the address policy's `addressProblem`). */
  blocked?: (address: string) => string | undefined;
}

export class NetworkProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Duplex>();
  private readonly lookup: ReturnType<typeof guardLookup>;
  private readonly blocked: (address: string) => string | undefined;
  private closing: Promise<void> | undefined;

  private constructor(private readonly opts: NetworkProxyOptions) {
    this.blocked = opts.blocked ?? addressProblem;
    this.lookup = guardLookup(opts.resolve, this.blocked);
    this.server = createServer((req, res) => this.forward(req, res));
    this.server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) =>
      this.tunnel(req, client, head),
    );
    this.server.on('connection', (s: Socket) => this.track(s));
  }

  static async start(opts: NetworkProxyOptions): Promise<NetworkProxy> {
    const proxy = new NetworkProxy(opts);
    await rm(opts.socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(opts.socketPath, () => {
        proxy.server.off('error', reject);
        resolve();
      });
    });
    if (opts.uid !== undefined) await chown(opts.socketPath, opts.uid, opts.uid);
    await chmod(opts.socketPath, 0o600);
    return proxy;
  }

  get socketPath(): string {
    return this.opts.socketPath;
  }

  /** Whether host:port is on the list (the name as the client gave it, lower case). */
  allows(host: string, port: number): boolean {
    const name = host.toLowerCase().replace(/\.$/, '');
    return this.opts.allowed.some((a) => hostMatches(name, a.host) && a.ports.includes(port));
  }

  /** Why host:port is refused before any DNS, or undefined. */
  private refusal(host: string, port: number): string | undefined {
    if (!this.allows(host, port)) return `${host}:${port} is not in EXEC_SHELL_NETWORK`;
    const literal = host.replace(/^\[|\]$/g, '');
    const problem = isIP(literal) ? this.blocked(literal) : undefined;
    if (problem) return `${literal} is ${problem}`;
    return undefined;
  }

  private track(socket: Duplex): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private tunnel(req: IncomingMessage, client: Duplex, head: Buffer): void {
    this.track(client);
    client.on('error', () => undefined);
    const target = parseAuthority(req.url ?? '');
    const refused = target ? this.refusal(target.host, target.port) : 'not host:port';
    if (!target || refused) {
      this.opts.logger.info({ target: req.url, refused }, 'exec_shell: network request refused');
      client.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\n${refused}\n`);
      return;
    }
    const upstream = connect({
      host: target.host.replace(/^\[|\]$/g, ''),
      port: target.port,
      lookup: this.lookup,
    });
    this.track(upstream);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.once('error', (err) => {
      this.opts.logger.info({ target: req.url, err: err.message }, 'exec_shell: network request failed');
      if (connected) client.destroy();
      else client.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n\r\n${err.message}\n`);
    });
    client.once('close', () => upstream.destroy());
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res
        .writeHead(400, { 'content-type': 'text/plain' })
        .end('proxy requests need an absolute http:// URL\n');
      return;
    }
    const port = Number(url.port || 80);
    const refused =
      url.protocol === 'http:' ? this.refusal(url.hostname, port) : 'only http: (https goes by CONNECT)';
    if (refused) {
      this.opts.logger.info({ target: url.host, refused }, 'exec_shell: network request refused');
      res.writeHead(403, { 'content-type': 'text/plain' }).end(`${refused}\n`);
      return;
    }
    const {
      'proxy-connection': _pc,
      'proxy-authorization': _pa,
      connection: _c,
      'keep-alive': _k,
      ...headers
    } = req.headers;
    const upstream = request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port,
        method: req.method,
        path: `${url.pathname}${url.search}`,
        headers,
        lookup: this.lookup,
        // A connection of its own each time: a pooled one would skip the address check, and
        // would carry one chat's requests on a connection another chat's opened.
        agent: false,
      },
      (up) => {
        // Hop-by-hop: the client's connection to the proxy is not the proxy's to the host.
        const { connection: _c, 'keep-alive': _k, ...headers } = up.headers;
        res.writeHead(up.statusCode ?? 502, headers);
        up.pipe(res);
      },
    );
    upstream.once('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`${err.message}\n`);
    });
    req.pipe(upstream);
  }

  /** Stop listening and cut every open connection. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const s of this.sockets) s.destroy();
      await new Promise<void>((resolve) => this.server.close(() => resolve()));
      await rm(this.opts.socketPath, { force: true });
    })();
    return this.closing;
  }
}

/** `host:port` of a CONNECT (IPv6 in brackets). */
function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]\s]+):(\d{1,5})$/.exec(authority);
  const port = Number(m?.[2]);
  if (!m || port < 1 || port > 65535) return undefined;
  return { host: m[1]!, port };
}
