import { createMCPClient, type MCPClient, type MCPTransport } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport as StdioTransport } from '@ai-sdk/mcp/mcp-stdio';
import type { ToolSet } from 'ai';
import type { Logger } from '../../shared/logger.js';
import { countTextTokens } from '../../shared/tokens.js';
import { isStdio, type McpConfigFile, type McpServerConfig } from './mcp-config.js';
import { wrapMcpTool } from './wrap-tool.js';

export interface McpSettings {
  /** MCP_TOOL_TIMEOUT_MS: one tool call's limit. */
  toolTimeoutMs: number;
  /** MCP_RESULT_MAX_CHARS: longer results are truncated with a note. */
  resultMaxChars: number;
  /** MCP_RECONNECT_MS: pause between reconnect attempts to a server that is down. */
  reconnectMs: number;
  /** Limit for connecting and listing a server's tools. */
  connectTimeoutMs: number;
}

/** Told whenever a server goes up or down (the `chatlane_mcp_server_up` gauge). */
export type McpStatusListener = (server: string, up: boolean) => void;

/** Tool names are `<server>__<tool>`; characters a provider refuses become `_`. */
export function mcpToolName(server: string, tool: string): string {
  return `${server}__${tool.replace(/[^A-Za-z0-9_-]/g, '_')}`.slice(0, 64);
}

class McpServer {
  client: MCPClient | undefined;
  tools: ToolSet = {};
  tokens = 0;
  error: string | undefined = 'not connected yet';
  private timer: NodeJS.Timeout | undefined;
  private connecting: Promise<void> | undefined;
  closed = false;

  constructor(
    readonly name: string,
    private readonly config: McpServerConfig,
    private readonly settings: McpSettings,
    private readonly logger: Logger,
    private readonly changed: () => void,
    private readonly status: McpStatusListener,
  ) {}

  get up(): boolean {
    return this.client !== undefined;
  }

  connect(): Promise<void> {
    this.connecting ??= this.tryConnect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async tryConnect(): Promise<void> {
    if (this.closed || this.client) return;
    try {
      const client = await this.open();
      if (this.closed) {
        await client.close().catch(() => undefined);
        return;
      }
      // Converted once per connection: the turn reuses these tool objects.
      const listed = await client.tools();
      const allow = this.config.allowTools ? new Set(this.config.allowTools) : undefined;
      const tools: ToolSet = {};
      let tokens = 0;
      for (const [name, t] of Object.entries(listed)) {
        if (allow && !allow.has(name)) continue;
        const exposed = mcpToolName(this.name, name);
        tools[exposed] = wrapMcpTool(t, {
          name: exposed,
          timeoutMs: this.settings.toolTimeoutMs,
          resultMaxChars: this.settings.resultMaxChars,
          onCallFailed: () => this.probe(),
        });
        tokens += countTextTokens(JSON.stringify({ name: exposed, d: t.description, s: t.inputSchema }));
      }
      this.client = client;
      this.tools = tools;
      this.tokens = tokens;
      this.error = undefined;
      this.status(this.name, true);
      this.changed();
      this.logger.info({ server: this.name, tools: Object.keys(tools) }, 'MCP server connected');
    } catch (err) {
      this.error = (err as Error).message ?? String(err);
      this.status(this.name, false);
      this.logger.warn(
        { server: this.name, err: this.error, retryInMs: this.settings.reconnectMs },
        'MCP server unavailable; its tools are missing until it reconnects',
      );
      this.schedule();
    }
  }

  /** stdio, or Streamable HTTP falling back to SSE for servers that only speak the older transport. */
  private async open(): Promise<MCPClient> {
    const base = {
      clientName: 'chatlane',
      initializationOptions: { timeout: this.settings.connectTimeoutMs },
      onUncaughtError: (err: unknown) => this.logger.warn({ server: this.name, err }, 'MCP client error'),
    };
    const cfg = this.config;
    if (isStdio(cfg)) {
      const transport: MCPTransport = new StdioTransport({
        command: cfg.command,
        ...(cfg.args && { args: cfg.args }),
        ...(cfg.env && { env: cfg.env }),
        ...(cfg.cwd && { cwd: cfg.cwd }),
      });
      const client = await createMCPClient({ ...base, transport });
      // The client installed its own handler; chain ours so a dead process is noticed at once.
      const clientOnClose = transport.onclose;
      transport.onclose = () => {
        clientOnClose?.();
        this.lost('server process exited');
      };
      return client;
    }
    const http = { url: cfg.url, ...(cfg.headers && { headers: cfg.headers }) };
    try {
      return await createMCPClient({ ...base, transport: { type: 'http', ...http } });
    } catch (err) {
      try {
        return await createMCPClient({ ...base, transport: { type: 'sse', ...http } });
      } catch {
        throw err;
      }
    }
  }

  /** After a failed call: a server that no longer answers a tools list is treated as lost. */
  probe(): void {
    const client = this.client;
    if (!client) return;
    client.listTools({ options: { timeout: this.settings.connectTimeoutMs } }).catch((err: unknown) => {
      if (this.client === client) this.lost(`not answering: ${(err as Error).message ?? err}`);
    });
  }

  /** The connection is gone: drop its tools (later turns do not offer them) and reconnect. */
  lost(reason: string): void {
    const client = this.client;
    if (!client || this.closed) return;
    this.client = undefined;
    this.tools = {};
    this.tokens = 0;
    this.error = reason;
    this.status(this.name, false);
    this.changed();
    this.logger.warn({ server: this.name, reason }, 'MCP server lost; reconnecting');
    client.close().catch(() => undefined);
    this.schedule();
  }

  private schedule(): void {
    if (this.closed || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect();
    }, this.settings.reconnectMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.connecting?.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => undefined);
  }
}

/**
 * The operator's MCP servers (MCP_CONFIG) for one worker process. `start()` connects to all
 * of them; one that is down leaves the worker running without its tools and is retried in the
 * background. Turns read `tools()`, the same objects until a server connects or drops.
 */
export class McpTools {
  private readonly servers: McpServer[];
  private merged: ToolSet | undefined;
  private closing: Promise<void> | undefined;

  constructor(
    file: McpConfigFile,
    settings: McpSettings,
    logger: Logger,
    status: McpStatusListener = () => {},
  ) {
    this.servers = Object.entries(file.mcpServers).map(
      ([name, cfg]) =>
        new McpServer(
          name,
          cfg,
          settings,
          logger.child({ mcpServer: name }),
          () => {
            this.merged = undefined;
          },
          status,
        ),
    );
  }

  /** Connect every server once (bounded by connectTimeoutMs each); never throws. */
  async start(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.connect()));
  }

  tools(): ToolSet {
    this.merged ??= Object.assign({}, ...this.servers.map((s) => s.tools));
    return this.merged!;
  }

  /** Tokens of the offered tool definitions (counted once per connection). */
  toolTokens(): number {
    return this.servers.reduce((n, s) => n + s.tokens, 0);
  }

  /** Per server: 'up', or why it is down (for /readyz). */
  status(): Record<string, string> {
    return Object.fromEntries(this.servers.map((s) => [s.name, s.up ? 'up' : `down: ${s.error}`]));
  }

  /** Idempotent: stops reconnecting and closes every client (stdio servers exit). */
  close(): Promise<void> {
    this.closing ??= Promise.all(this.servers.map((s) => s.close())).then(() => undefined);
    return this.closing;
  }
}
