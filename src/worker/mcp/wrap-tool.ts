import type { Tool } from 'ai';
import { untilAborted } from '../../shared/abort.js';

export interface WrapOptions {
  /** The name the model sees (`<server>__<tool>`), for error texts. */
  name: string;
  timeoutMs: number;
  resultMaxChars: number;
  /** A call failed or timed out: the server may be gone, check it. */
  onCallFailed: () => void;
}

interface McpContent {
  type: string;
  text?: string;
}
interface McpResult {
  content?: McpContent[];
  isError?: boolean;
  [key: string]: unknown;
}

const textOf = (result: McpResult) =>
  (result.content ?? [])
    .filter((c) => c.type === 'text' && typeof c.text === 'string')
    .map((c) => c.text)
    .join('\n');

/**
 * A result over the cap keeps its text, cut to the cap, and says so: the model knows it saw
 * part of the answer, and the committed history stays bounded (it is stored with the turn).
 */
export function capResult(result: unknown, maxChars: number): unknown {
  const size = JSON.stringify(result ?? null).length;
  if (size <= maxChars) return result;
  const text = typeof result === 'object' && result !== null ? textOf(result as McpResult) : String(result);
  const note = `\n[truncated by chatlane: the tool result was ${size} characters, the limit is ${maxChars}]`;
  return {
    content: [{ type: 'text', text: `${text.slice(0, Math.max(0, maxChars - note.length))}${note}` }],
  };
}

/**
 * An MCP tool as a turn uses it: a call past MCP_TOOL_TIMEOUT_MS, a failed call, a dead
 * server and an `isError` result all throw, which the AI SDK turns into a tool error result
 * the model reads (never a failed turn); results over the cap are truncated with a note.
 */
export function wrapMcpTool(tool: Tool, o: WrapOptions): Tool {
  const execute = tool.execute;
  if (!execute) return tool;
  return {
    ...tool,
    execute: async (input: unknown, options) => {
      const timeout = AbortSignal.timeout(o.timeoutMs);
      const signal = options.abortSignal ? AbortSignal.any([options.abortSignal, timeout]) : timeout;
      let result: unknown;
      try {
        result = await untilAborted(
          Promise.resolve(execute(input, { ...options, abortSignal: signal })),
          signal,
        );
      } catch (err) {
        o.onCallFailed();
        if (timeout.aborted) throw new Error(`${o.name} timed out after ${o.timeoutMs} ms`);
        const message = err instanceof Error ? err.message : String(err);
        throw new Error(`${o.name} failed: ${message}`);
      }
      if (typeof result === 'object' && result !== null && (result as McpResult).isError) {
        const text = textOf(result as McpResult).slice(0, o.resultMaxChars);
        throw new Error(`${o.name} returned an error: ${text || 'no details'}`);
      }
      return capResult(result, o.resultMaxChars);
    },
  } as Tool;
}
