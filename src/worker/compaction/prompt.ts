import { type ChatMessage, messageText } from '../../shared/messages.js';
import { modelView } from '../../shared/model-view.js';

export const TOOL_OUTPUT_MAX_CHARS = 2000;
const TEXT_MAX_CHARS = 8000;

export const SUMMARY_SYSTEM = [
  'You maintain the running summary of a long chat between a user and an assistant.',
  'You are NOT a participant: never answer the user, never continue the conversation.',
  'Given the previous summary (if any) and the new part of the conversation, write the updated summary.',
  'Keep everything that still matters; drop small talk. Be specific: names, numbers, dates, decisions.',
  'Use exactly these sections (markdown headings), each as short bullet points, "none" when empty:',
  '## Goals and requests',
  '## Facts and user preferences',
  '## Decisions',
  '## Open items',
  '## Lookup hints',
  'Under "Lookup hints" list details you left out (exact figures, quotes, long outputs) with search',
  'words the assistant can pass to the chat_history_search tool to find the original messages.',
].join('\n');

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… [${text.length - max} chars cut]`;
}

/**
 * The conversation as tagged text, not as chat turns, so the model reads it as material
 * to summarise rather than a dialogue to continue. Tool outputs are truncated.
 */
export function serialise(messages: ChatMessage[]): string {
  const lines: string[] = [];
  for (const m of messages) {
    const who =
      m.role === 'user' ? `[User${m.metadata.username ? ` ${m.metadata.username}` : ''}]` : '[Assistant]';
    // A failed message is summarised as its marker: its content failed a turn once.
    const text = messageText(modelView(m, Number.POSITIVE_INFINITY).message).trim();
    if (text) lines.push(`${who}: ${clip(text, TEXT_MAX_CHARS)}`);
    for (const part of m.parts as Array<{
      type: string;
      input?: unknown;
      output?: unknown;
      errorText?: string;
    }>) {
      if (!part.type.startsWith('tool-')) continue;
      const name = part.type.slice('tool-'.length);
      const input = clip(JSON.stringify(part.input ?? null), TOOL_OUTPUT_MAX_CHARS);
      const output = clip(JSON.stringify(part.output ?? part.errorText ?? null), TOOL_OUTPUT_MAX_CHARS);
      lines.push(`[Tool ${name}]: input ${input} → output ${output}`);
    }
  }
  return lines.join('\n');
}

/** Update prompt: the previous summary plus only the messages it does not cover yet. */
export function updatePrompt(previousSummary: ChatMessage | undefined, newMessages: ChatMessage[]): string {
  const parts: string[] = [];
  parts.push(
    previousSummary
      ? `<previous-summary>\n${messageText(previousSummary).trim()}\n</previous-summary>`
      : '<previous-summary>none</previous-summary>',
  );
  parts.push(`<new-conversation>\n${serialise(newMessages)}\n</new-conversation>`);
  parts.push('Write the updated summary now.');
  return parts.join('\n\n');
}
