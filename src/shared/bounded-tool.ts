import { untilAborted } from './abort.js';

/**
 * The limits every tool a turn runs from outside chatlane's own code is held to: the
 * operator's MCP tools (worker/mcp/wrap-tool.ts) and the program's own code tools
 * (worker/agent/tools/custom-tools.ts). A call that throws or runs past its time is thrown
 * again as a `ToolCallError` naming the tool, which the AI SDK turns into a tool error the
 * model reads: a tool never fails a turn. A result over the cap is cut with a note.
 */

/** Why a bounded call failed: it threw (`failed`) or ran past its time (`timeout`). */
export class ToolCallError extends Error {
  override name = 'ToolCallError';
  constructor(
    message: string,
    readonly kind: 'failed' | 'timeout',
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

/** An `execute`'s value: a streaming execute (preliminary results) settles on its last one. */
async function settle(value: unknown): Promise<unknown> {
  if (!isAsyncIterable(value)) return value;
  let last: unknown;
  for await (const part of value) last = part;
  return last;
}

/**
 * `run` with `timeoutMs`: its signal fires at the limit or when `outer` does (the turn's), and
 * the wait ends then even if `run` ignores it (the work itself runs on unseen). Throws a
 * `ToolCallError` naming `name` for a throw or a timeout.
 */
export async function boundedCall(
  name: string,
  timeoutMs: number,
  outer: AbortSignal | undefined,
  run: (signal: AbortSignal) => unknown,
): Promise<unknown> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = outer ? AbortSignal.any([outer, timeout]) : timeout;
  try {
    return await untilAborted(
      Promise.resolve().then(() => settle(run(signal))),
      signal,
    );
  } catch (err) {
    if (timeout.aborted) throw new ToolCallError(`${name} timed out after ${timeoutMs} ms`, 'timeout');
    throw new ToolCallError(`${name} failed: ${messageOf(err)}`, 'failed', { cause: err });
  }
}

interface McpContent {
  type: string;
  text?: string;
}

/** The text parts of an MCP tool result (`{ content: [{ type: 'text', text }] }`), if it is one. */
export function mcpText(result: unknown): string | undefined {
  const content = (result as { content?: unknown } | null)?.content;
  if (!Array.isArray(content)) return undefined;
  return (content as McpContent[])
    .filter((c) => c?.type === 'text' && typeof c.text === 'string')
    .map((c) => c.text)
    .join('\n');
}

/**
 * A result over the cap keeps its text, cut to the cap, and says so: the model knows it saw
 * part of the answer, and the committed history stays bounded (it is stored with the turn).
 * An MCP result stays an MCP result (its text parts); any other becomes its JSON text, cut.
 */
export function capResult(result: unknown, maxChars: number): unknown {
  const json = JSON.stringify(result ?? null);
  const size = json.length;
  if (size <= maxChars) return result;
  const mcp = mcpText(result);
  const text = mcp ?? (typeof result === 'string' ? result : json);
  const note = `\n[truncated by chatlane: the tool result was ${size} characters, the limit is ${maxChars}]`;
  const cut = `${text.slice(0, Math.max(0, maxChars - note.length))}${note}`;
  return mcp === undefined ? cut : { content: [{ type: 'text', text: cut }] };
}
