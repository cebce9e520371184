import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface TestMcpServer {
  url: string;
  port: number;
  /** Stop listening and cut every open connection (a server that dies). */
  close(): Promise<void>;
}

/**
 * A small Streamable HTTP MCP server (stateless: a server and transport per request, the
 * SDK's documented pattern) with tools for the failure cases: `lookup` answers, `hang`
 * never does, `big` answers 50,000 characters, `broken` returns isError, `die` kills the server.
 */
export async function startTestMcpServer(port = 0): Promise<TestMcpServer> {
  const sockets = new Set<Socket>();
  let http: Server;
  const die = () => {
    http.close();
    for (const s of sockets) s.destroy();
  };
  const build = () => {
    const server = new McpServer({ name: 'test-http', version: '1.0.0' });
    server.registerTool(
      'lookup',
      { description: 'Look up a word', inputSchema: { word: z.string() } },
      async ({ word }) => ({ content: [{ type: 'text', text: `definition of ${word}` }] }),
    );
    server.registerTool('hang', { description: 'Never answers' }, () => new Promise(() => {}));
    server.registerTool('big', { description: 'A huge answer' }, async () => ({
      content: [{ type: 'text', text: 'x'.repeat(50_000) }],
    }));
    server.registerTool('broken', { description: 'Always fails' }, async () => ({
      content: [{ type: 'text', text: 'database is on fire' }],
      isError: true,
    }));
    server.registerTool('die', { description: 'Kills the server' }, () => {
      setImmediate(die);
      return new Promise(() => {});
    });
    return server;
  };
  http = createServer(async (req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  http.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => http.listen(port, '127.0.0.1', resolve));
  const bound = (http.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${bound}/mcp`,
    port: bound,
    close: async () => {
      die();
      await new Promise((r) => setTimeout(r, 0));
    },
  };
}
