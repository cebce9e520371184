import type { ChatMessage } from './messages.js';

/**
 * How a stored message is cut before it goes to a model: its text parts together keep at
 * most `maxChars` characters (MAX_CHARS_PER_MESSAGE), the rest is replaced by a short note.
 * Tool calls and files are left alone. Token counts describe this view, never the stored
 * message, so that what is counted is exactly what is sent (a 100 KB message costs the
 * model ~maxChars of text, and counting it costs no more than that either).
 */
export interface ModelView {
  message: ChatMessage;
  truncated: boolean;
}

/**
 * A message that failed (docs/agent.md "When a message fails") is shown to later turns as this
 * marker only: its content made a turn fail once (too long, refused, an unsafe file), so
 * sending it again would fail the next turn too, while the marker keeps the conversation
 * readable ("the user was asked to send it again").
 */
export function failedMarker(code: string): string {
  return `[This message could not be processed (${code}); the user was told and asked to send it again.]`;
}

export function modelView(message: ChatMessage, maxChars: number): ModelView {
  if (message.metadata?.failed === true) {
    const code = message.metadata.failure?.code ?? 'FAILED';
    return { message: { ...message, parts: [{ type: 'text', text: failedMarker(code) }] }, truncated: true };
  }
  if (!Array.isArray(message.parts) || maxChars === Number.POSITIVE_INFINITY) {
    return { message, truncated: false };
  }
  let remaining = maxChars;
  let changed = false;
  const parts = message.parts.map((part) => {
    if (part?.type !== 'text' || typeof part.text !== 'string') return part;
    if (part.text.length <= remaining) {
      remaining -= part.text.length;
      return part;
    }
    const kept = part.text.slice(0, safeCut(part.text, remaining));
    remaining = 0;
    changed = true;
    return { ...part, text: `${kept}… [truncated ${part.text.length - kept.length} chars]` };
  });
  if (!changed) return { message, truncated: false };
  return { message: { ...message, parts }, truncated: true };
}

/** Characters of the text parts: what `maxChars` limits. */
export function textChars(message: Pick<ChatMessage, 'parts'>): number {
  let n = 0;
  if (!Array.isArray(message.parts)) return n;
  for (const part of message.parts)
    if (part?.type === 'text' && typeof part.text === 'string') n += part.text.length;
  return n;
}

/** Never ends a cut on the first half of a surrogate pair, which would leave invalid UTF-16. */
function safeCut(text: string, at: number): number {
  const code = text.charCodeAt(at - 1);
  return at > 0 && code >= 0xd800 && code <= 0xdbff ? at - 1 : at;
}
