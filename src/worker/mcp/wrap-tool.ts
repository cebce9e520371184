import type { Tool } from 'ai';
import { boundedCall, capResult, mcpText } from '../../shared/bounded-tool.js';

export interface WrapOptions {
  /** The name the model sees (`<server>__<tool>`), for error texts. */
  name: string;
  timeoutMs: number;
  resultMaxChars: number;
  /** A call failed or timed out: the server may be gone, check it. */
  onCallFailed: () => void;
}

/**
 * An MCP tool as a turn uses it: a call past MCP_TOOL_TIMEOUT_MS, a failed call, a dead
 * server and an `isError` result all throw, which the AI SDK turns into a tool error result
 * the model reads (never a failed turn); results over the cap are truncated with a note
 * (shared/bounded-tool.ts, as for the program's own code tools).
 */
export function wrapMcpTool(tool: Tool, o: WrapOptions): Tool {
  const execute = tool.execute;
  if (!execute) return tool;
  return {
    ...tool,
    execute: async (input: unknown, options) => {
      let result: unknown;
      try {
        result = await boundedCall(o.name, o.timeoutMs, options.abortSignal, (abortSignal) =>
          execute(input, { ...options, abortSignal }),
        );
      } catch (err) {
        o.onCallFailed();
        throw err;
      }
      if (typeof result === 'object' && result !== null && (result as { isError?: unknown }).isError) {
        const text = (mcpText(result) ?? '').slice(0, o.resultMaxChars);
        throw new Error(`${o.name} returned an error: ${text || 'no details'}`);
      }
      return capResult(result, o.resultMaxChars);
    },
  } as Tool;
}
