/**
 * The names of chatlane's own tools (agent/tools/chat-tools.ts builds them). The prompt's
 * guidance (assembler.ts) names only the ones a turn offers, so the pipeline knows the names
 * without depending on the tools themselves.
 */
/** chatlane's own tools whose offer depends on the chat (the rest are offered to every turn). */
export type ChatToolName =
  | 'chat_send'
  | 'chat_memory_update'
  | 'chat_history_search'
  | 'chat_context_new'
  | 'chat_context_list'
  | 'chat_context_load'
  | 'chat_context_clear_active';
