import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '../../shared/config.js';

/**
 * The MCP_CONFIG file: the `mcpServers` format people keep for Claude Desktop, Cursor and
 * VS Code, plus chatlane's optional `allowTools` per server. Unknown keys are refused so a
 * typo (`allowtools`) cannot silently expose every tool of a server.
 */

// Tool names the model sees are `<server>__<tool>`; providers accept [A-Za-z0-9_-]{1,64}.
const SERVER_NAME = /^[A-Za-z0-9-]{1,32}$/;

const allowTools = z.array(z.string().min(1)).optional();

const stdioServer = z
  .object({
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().min(1).optional(),
    allowTools,
  })
  .strict();

const httpServer = z
  .object({
    url: z
      .string()
      .url()
      .refine((u) => /^https?:/.test(u), 'must be an http(s) URL'),
    headers: z.record(z.string(), z.string()).optional(),
    allowTools,
  })
  .strict();

const server = z.union([stdioServer, httpServer], {
  error: () => 'must have either `command` (stdio) or `url` (Streamable HTTP / SSE), and no other keys',
});

export const mcpConfigSchema = z
  .object({
    mcpServers: z.record(z.string(), server).superRefine((servers, ctx) => {
      for (const name of Object.keys(servers)) {
        if (!SERVER_NAME.test(name))
          ctx.addIssue({
            code: 'custom',
            path: [name],
            message: 'server names are 1-32 chars of [A-Za-z0-9-]',
          });
      }
    }),
  })
  .strict();

export type McpConfigFile = z.infer<typeof mcpConfigSchema>;
export type McpServerConfig = z.infer<typeof server>;

export function isStdio(s: McpServerConfig): s is z.infer<typeof stdioServer> {
  return 'command' in s;
}

/** Read and validate MCP_CONFIG; a bad file is a ConfigError naming the offending field. */
export function loadMcpConfig(path: string | undefined): McpConfigFile | undefined {
  if (!path) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError(`MCP_CONFIG: cannot read ${path} as JSON: ${(err as Error).message}`);
  }
  const parsed = mcpConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map(
      (i) => `  MCP_CONFIG ${path}: ${i.path.join('.') || '(file)'}: ${i.message}`,
    );
    throw new ConfigError(`invalid MCP configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}
