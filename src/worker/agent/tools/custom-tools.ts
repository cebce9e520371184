import { asSchema, type FlexibleSchema, type Schema, type Tool, type ToolSet } from 'ai';
import { boundedCall, capResult, ToolCallError } from '../../../shared/bounded-tool.js';
import { ConfigError } from '../../../shared/config.js';
import type { ChatMessage } from '../../../shared/messages.js';
import { type Metrics, recordToolCall } from '../../../shared/metrics.js';
import { countTextTokens } from '../../../shared/tokens.js';
import { createOnce, type OnceTurn } from './once.js';
import { type ChatlaneToolContext, CONTEXT_KEYS, issue, wasIssued } from './tool-context.js';

export { type ChatlaneToolContext, chatlaneToolContextSchema } from './tool-context.js';

/**
 * The program's own tools (`startChatlane({ tools })`): AI SDK tools the worker runs beside
 * chatlane's, held to the rules of MCP tools (a time limit, a capped result, every failure a
 * tool error the model reads, logged and counted), with the chat in their `options.context`.
 */

/** What a turn gives its tools' context. */
export interface ToolContextTurn extends OnceTurn {
  /** The user messages the turn answers so far, oldest first. */
  messages: () => readonly ChatMessage[];
}

/** One turn's context for every tool given in code (read-only; the messages as the turn sees them). */
export function toolContext(turn: ToolContextTurn): ChatlaneToolContext {
  const newest = () => turn.messages().at(-1)?.metadata;
  const context: ChatlaneToolContext = {
    chatKey: turn.chatKey,
    runId: turn.runId,
    get messageIds() {
      return turn.messages().map((m) => m.id);
    },
    get channel() {
      return newest()?.channel;
    },
    get userId() {
      return newest()?.userId;
    },
    get username() {
      return newest()?.username;
    },
    logger: turn.logger,
    once: createOnce(turn),
  };
  issue(context);
  return Object.freeze(context);
}

/**
 * The strictest tool-name rule the supported providers share: OpenAI and Anthropic take
 * `^[a-zA-Z0-9_-]{1,64}$`, Gemini a name starting with a letter or `_`, of letters, digits,
 * `_`, `.`, `:` and `-`, at most 64 long. So: a letter or `_`, then letters, digits, `_` and
 * `-`, 64 at most.
 */
const PORTABLE_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/** Names of built-in tools that are not `chat_*`. */
const BUILT_IN = ['skills_load', 'exec_shell'];

/** Why `name` cannot be a tool given in code; undefined when it can. */
function nameProblem(name: string, mcpServers: readonly string[]): string | undefined {
  if (!PORTABLE_NAME.test(name)) {
    return 'is not a name every provider accepts: 1–64 characters of A–Z, a–z, 0–9, _ and -, starting with a letter or _';
  }
  if (/^chat_/i.test(name))
    return "clashes with chatlane's own tools: names starting with chat_ are reserved";
  if (BUILT_IN.includes(name.toLowerCase())) return "is the name of one of chatlane's own tools";
  const mcp = name.indexOf('__');
  if (mcp >= 0) {
    const server = name.slice(0, mcp);
    return mcpServers.includes(server)
      ? `clashes with the tools of MCP server "${server}" (named <server>__<tool>)`
      : 'contains "__", which is reserved for MCP tools (named <server>__<tool>)';
  }
  return undefined;
}

function refuse(problems: string[]): void {
  if (problems.length > 0) throw new ConfigError(`tools: ${problems.join('; ')}`);
}

/**
 * Throws a `ConfigError` naming each tool whose name clashes with a built-in tool (`chat_*`,
 * `skills_load`, `exec_shell`), takes the `<server>__<tool>` form of MCP tools (any name with
 * `__`: a server added later can then never clash), or breaks a provider's tool-name rules.
 */
export function checkToolNames(tools: ToolSet, reserved: { mcpServers: readonly string[] }): void {
  const problems: string[] = [];
  for (const name of Object.keys(tools)) {
    const problem = nameProblem(name, reserved.mcpServers);
    if (problem) problems.push(`${JSON.stringify(name)} ${problem}`);
  }
  refuse(problems);
}

type CodeTool = Tool & {
  contextSchema?: FlexibleSchema<unknown>;
  needsApproval?: unknown;
  type?: string;
};

/** The property names a schema's JSON Schema requires; undefined when it has none to read. */
async function requiredKeys(schema: FlexibleSchema<unknown>): Promise<string[] | undefined> {
  try {
    const json = (await asSchema(schema).jsonSchema) as { required?: unknown };
    return Array.isArray(json.required) ? json.required.map(String) : [];
  } catch {
    // Not expressible as JSON Schema (a zod custom type): it is checked on every call instead.
    return undefined;
  }
}

/**
 * Everything about the tools given in code that can be known at start: `checkToolNames`, an
 * `execute` on each (chatlane runs every tool in the worker), and a `contextSchema` that
 * requires only what a chat's context has. A tool's `needsApproval` is honoured: its calls wait
 * for a person (docs/approvals.md). One `ConfigError` lists every problem, each naming its tool.
 */
export async function checkTools(tools: ToolSet, reserved: { mcpServers: readonly string[] }): Promise<void> {
  checkToolNames(tools, reserved);
  const problems: string[] = [];
  for (const [name, t] of Object.entries(tools) as Array<[string, CodeTool]>) {
    const named = JSON.stringify(name);
    if (typeof t?.execute !== 'function') {
      problems.push(
        `${named} has no execute: chatlane runs every tool itself (no provider-run or client-side tools)`,
      );
      continue;
    }
    if (!t.contextSchema) continue;
    const missing = (await requiredKeys(t.contextSchema))?.filter(
      (k) => !(CONTEXT_KEYS as readonly string[]).includes(k),
    );
    if (missing?.length) {
      problems.push(
        `${named} has a contextSchema requiring ${missing.join(', ')}, which the chat's context does not have (it has ${CONTEXT_KEYS.join(', ')})`,
      );
    }
  }
  refuse(problems);
}

export interface CustomToolSettings {
  /** TOOL_TIMEOUT_MS: one call's limit. */
  timeoutMs: number;
  /** TOOL_RESULT_MAX_CHARS: a longer result (as JSON) is cut with a note. */
  resultMaxChars: number;
  metrics?: Metrics | undefined;
}

/** The tools given in code, wrapped once per process, with what the turn needs to offer them. */
export interface CustomTools {
  /** Wrapped: limits, errors, metrics; no `contextSchema` left for the SDK (checked inside). */
  tools: ToolSet;
  /** Their definitions' tokens, counted once: part of every request's fixed share. */
  tokens: number;
}

const secondsSince = (start: number) => (performance.now() - start) / 1000;

/** The tool a turn offers for `tool`: see `CustomTools.tools`. */
function wrapCustomTool(name: string, tool: CodeTool, s: CustomToolSettings): Tool {
  const { contextSchema, execute, ...rest } = tool;
  if (!execute) throw new ConfigError(`tools: ${JSON.stringify(name)} has no execute`);
  const schema = contextSchema && asSchema(contextSchema);
  return {
    ...rest,
    execute: async (input: unknown, options) => {
      const start = performance.now();
      const raw = options.context as ChatlaneToolContext | undefined;
      try {
        if (!raw || !wasIssued(raw))
          throw new ToolCallError(`${name} was called without the chat's context`, 'failed');
        const context = schema ? await satisfying(name, schema, raw) : raw;
        const result = await boundedCall(name, s.timeoutMs, options.abortSignal, (abortSignal) =>
          execute(input, { ...options, abortSignal, context } as Parameters<typeof execute>[1]),
        );
        if (s.metrics) recordToolCall(s.metrics, { tool: name, result: 'ok', seconds: secondsSince(start) });
        return capResult(result, s.resultMaxChars);
      } catch (err) {
        const timeout = err instanceof ToolCallError && err.kind === 'timeout';
        if (s.metrics) {
          recordToolCall(s.metrics, {
            tool: name,
            result: timeout ? 'timeout' : 'error',
            seconds: secondsSince(start),
          });
        }
        raw?.logger?.warn({ tool: name, toolCallId: options.toolCallId, err }, 'tool call failed');
        throw err;
      }
    },
  } as Tool;
}

/** The turn's context as the tool's `contextSchema` gives it (its value: a schema may transform it). */
async function satisfying(
  name: string,
  schema: Schema<unknown>,
  context: ChatlaneToolContext,
): Promise<unknown> {
  const checked = await schema.validate?.(context);
  if (!checked || checked.success) return checked ? checked.value : context;
  throw new ToolCallError(
    `${name}: the chat's context does not satisfy the tool's contextSchema: ${checked.error.message}`,
    'failed',
  );
}

/** One definition as the tokenizer sees it (name, description, input schema); counted once. */
function definitionTokens(name: string, tool: Tool): number {
  let schema: unknown;
  try {
    const json = asSchema(tool.inputSchema).jsonSchema;
    // A schema that only comes asynchronously is left out; RESERVE_TOKENS covers the framing.
    if (typeof (json as { then?: unknown }).then !== 'function') schema = json;
  } catch {
    schema = undefined;
  }
  const description = typeof tool.description === 'string' ? tool.description : undefined;
  return countTextTokens(JSON.stringify({ name, d: description, s: schema }));
}

/** Wraps the tools given in code for the turns of a process (built once, in their given order). */
export function prepareCustomTools(tools: ToolSet, settings: CustomToolSettings): CustomTools {
  const wrapped: ToolSet = {};
  let tokens = 0;
  for (const [name, t] of Object.entries(tools)) {
    wrapped[name] = wrapCustomTool(name, t as CodeTool, settings);
    tokens += definitionTokens(name, t);
  }
  return { tools: wrapped, tokens };
}
