import type { Tool, ToolSet } from 'ai';
import type { ContactBook } from '../../../shared/store/contacts.js';
import type { ChatToolName } from '../../pipeline/chat-tool-names.js';
import { chatSendTool } from './chat-send.js';
import { createContactSendTool } from './contact-send.js';
import { contextTools } from './context.js';
import { historySearchTool } from './history-search.js';
import { createMemoryTool } from './memory.js';

/**
 * What the turn's first read (acquire.lua) says about the chat: enough to know what can act.
 * Named as the Provider's result names them, which is passed as is.
 */
export interface ChatFacts {
  /** Entries in the chat's archive: what chat_history_search reads. */
  archived: number;
  /** Archived contexts: what chat_context_list and chat_context_load read. */
  contexts: number;
}

/**
 * The tools of ours a turn offers: only those that can do something for this chat now
 * (docs/design.md, "chatlane's tools"). Every offered definition is in every model request
 * of the turn (prompt tokens per call, and the request body is held ~3 times per call in
 * flight). The set changes only where the chat's state does (an archive, an archived
 * context: after a compaction or a context switch, which change the request anyway): the tool
 * definitions come first in what providers cache, so a tool offered from the second turn on
 * would make every chat's second request miss the first one's prefix. Fixed for the turn.
 */
export function offeredTools(facts: ChatFacts): ChatToolName[] {
  // chat_context_new and chat_context_clear_active from the first turn on: with no history they
  // archive nothing, but their turn has messages, and the next turn has history.
  const offered: ChatToolName[] = [
    'chat_send',
    'chat_memory_update',
    'chat_context_new',
    'chat_context_clear_active',
  ];
  if (facts.archived > 0) offered.push('chat_history_search');
  if (facts.contexts > 0) offered.push('chat_context_list', 'chat_context_load');
  return offered;
}

export interface ChatToolsOptions {
  /** MEMORY_MAX_TOKENS: the cap chat_memory_update states and enforces. */
  memoryMaxTokens: number;
  /** CONTACT_SEND=on: chat_contact_send, offered to every turn. */
  contacts?: ContactBook | undefined;
  /** `skills_load` over SKILLS_DIR, offered to every turn. */
  skillsTool?: Tool | undefined;
  /**
   * The tools given in code (custom-tools.ts, wrapped and their names checked), offered to
   * every turn after chatlane's own, in their given order.
   */
  custom?: ToolSet | undefined;
  /** EXEC_SHELL=on: exec_shell, offered to every turn. */
  execShellTool?: Tool | undefined;
}

/**
 * Every tool a worker process has, built once: chatlane's own (their per-turn state comes with
 * each call as their `context`, see tool-turn.ts), skills, contact send, the operator's MCP
 * tools (which change when a server connects or drops) and the tools given in code. A turn
 * gets the whole set with the names it offers as `activeTools`: the SDK sends only those to
 * the model, in the set's order (MCP tools, chatlane's, then those given in code), which is
 * the same from turn to turn: the definitions head every request a prompt cache reuses.
 */
export class ChatTools {
  private readonly own: ToolSet;
  /** Offered to every turn (skills_load, chat_contact_send, exec_shell). */
  private readonly always: string[];
  /** Of `always`, the ones that read the turn (tool-turn.ts). */
  private readonly alwaysWithTurn: string[];
  /** The tools given in code, never one named as one of ours. */
  private readonly custom: ToolSet;
  private readonly customNames: string[];
  private merged: { from: ToolSet | undefined; tools: ToolSet; names: string[] } | undefined;

  constructor(opts: ChatToolsOptions) {
    this.own = {
      chat_send: chatSendTool,
      chat_history_search: historySearchTool,
      chat_memory_update: createMemoryTool(opts.memoryMaxTokens),
      ...(opts.skillsTool && { skills_load: opts.skillsTool }),
      ...contextTools,
      ...(opts.contacts && { chat_contact_send: createContactSendTool(opts.contacts) }),
      ...(opts.execShellTool && { exec_shell: opts.execShellTool }),
    };
    this.always = [
      ...(opts.skillsTool ? ['skills_load'] : []),
      ...(opts.contacts ? ['chat_contact_send'] : []),
      ...(opts.execShellTool ? ['exec_shell'] : []),
    ];
    this.alwaysWithTurn = [
      ...(opts.contacts ? ['chat_contact_send'] : []),
      ...(opts.execShellTool ? ['exec_shell'] : []),
    ];
    this.customNames = Object.keys(opts.custom ?? {}).filter((n) => !Object.hasOwn(this.own, n));
    this.custom = Object.fromEntries(this.customNames.map((n) => [n, opts.custom![n]!]));
  }

  /**
   * The tool set (with the MCP tools connected now), the names offered for `facts`, the
   * offered names that get the turn as their context (`withTurn`): chatlane's own, never an
   * operator's MCP tool, which has no business with the chat's store and fence; and the names
   * of the tools given in code (`custom`), which get the chat's context (custom-tools.ts).
   */
  forTurn(
    facts: ChatFacts,
    mcpTools?: ToolSet,
  ): { tools: ToolSet; active: string[]; offered: ChatToolName[]; withTurn: string[]; custom: string[] } {
    if (!this.merged || this.merged.from !== mcpTools) {
      // chatlane's own tools after MCP's: an operator tool can never shadow one of them.
      const tools =
        mcpTools || this.customNames.length > 0 ? { ...mcpTools, ...this.own, ...this.custom } : this.own;
      const names = mcpTools ? Object.keys(mcpTools).filter((n) => !(n in this.own)) : [];
      this.merged = { from: mcpTools, tools, names };
    }
    const offered = offeredTools(facts);
    return {
      tools: this.merged.tools,
      active: [...this.merged.names, ...this.always, ...offered, ...this.customNames],
      offered,
      withTurn: [...this.alwaysWithTurn, ...offered],
      custom: this.customNames,
    };
  }
}
