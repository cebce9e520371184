import type { ToolSet } from 'ai';
import { ConfigError } from '../../../shared/config.js';

/**
 * A program's own tools (`startChatlane({ tools })`), checked at start. This file holds only
 * the names startChatlane calls; running the tools beside the built-in ones, with the chat in
 * their context, is the custom-tools work's (it replaces this file).
 */

/** What every provider accepts as a tool name (OpenAI's and Anthropic's rule, Gemini's first letter). */
const PROVIDER_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/**
 * Throws a ConfigError naming the first tool whose name a provider would refuse or that
 * clashes with chatlane's own (`chat_*`, `skills_load`) or an MCP server's (`<server>__…`).
 */
export function checkToolNames(tools: ToolSet, reserved: { mcpServers: readonly string[] }): void {
  for (const name of Object.keys(tools)) {
    const clash =
      name.startsWith('chat_') || name === 'skills_load'
        ? "chatlane's own tools are chat_* and skills_load"
        : reserved.mcpServers.find((server) => name.startsWith(`${server}__`)) &&
          'MCP tools are named <server>__<tool>';
    if (clash) throw new ConfigError(`tools: '${name}' clashes with a built-in tool (${clash})`);
    if (!PROVIDER_NAME.test(name)) {
      throw new ConfigError(
        `tools: '${name}' is not a name every provider accepts (a letter or _, then up to 63 of [A-Za-z0-9_-])`,
      );
    }
  }
}
