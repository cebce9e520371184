import { tool } from 'ai';
import { z } from 'zod';
import type { Logger } from '../../../shared/logger.js';
import type { ChatStore } from '../../../shared/store/chat-store.js';
import { type DeliveryTrigger, writeOutbox } from '../../outbox.js';
import { toolInput } from './input.js';

export interface ChatSendContext {
  store: ChatStore;
  chatKey: string;
  fence: string;
  runId: string;
  maxPerTurn: number;
  /** Told when the outbox script rejects our fence: the turn must stop. */
  onFencedOut: () => void;
  /** Shared across attempts of one turn, so a retried attempt never repeats a reply. */
  state?: ChatSendState;
  /** Triggers the chat's delivery after a write, when the chat has a reply route. */
  deliver?: DeliveryTrigger | undefined;
  /**
   * The last inbox stream id given to the model: recorded with each send until the commit,
   * so a turn taking over after a crash knows which messages this reply followed.
   */
  seen?: () => string;
  logger: Logger;
}

export interface ChatSendState {
  sent: string[];
  /** Texts earlier runs of this chat sent and never committed (the person has seen them). */
  earlier?: string[];
}

export const CHAT_SEND_MAX_CHARS = 8000;

const REFUSED_AS_SENT =
  'Not sent: the person already received this exact text before a restart. Continue from there.';

// Built once (toolInput): the SDK converts a bare zod schema to JSON Schema again on every step.
const INPUT = toolInput(z.object({ text: z.string().min(1).max(CHAT_SEND_MAX_CHARS) }));

/**
 * `chat_send`: the model's only way to reach the user. Each write is fenced, so a turn that
 * lost its chat cannot speak; identical text in one turn is sent once, and so is text an
 * earlier run already sent before it crashed; a per-turn cap keeps a looping model from
 * flooding the chat.
 */
export function createChatSendTool(ctx: ChatSendContext) {
  const state: ChatSendState = ctx.state ?? { sent: [] };
  const chatSend = tool({
    description:
      'Send a message to the user in this chat. This is the only way the user sees your reply. ' +
      'Call it once per reply message.',
    inputSchema: INPUT,
    execute: async ({ text }) => send(ctx, state, text),
  });
  /** The same fenced, deduplicated, capped send, for the turn's text-only fallback. */
  return { tool: chatSend, state, send: (text: string) => send(ctx, state, text) };
}

export type ChatSendOutput =
  | { status: 'sent'; id: string }
  | { status: 'duplicate' }
  | { status: 'already-sent'; message: string }
  | { status: 'limit'; message: string }
  | { status: 'fenced-out' };

export async function send(
  ctx: ChatSendContext,
  state: ChatSendState,
  text: string,
): Promise<ChatSendOutput> {
  if (state.sent.includes(text)) return { status: 'duplicate' };
  // Not an error: the retried turn's model may well say the same thing again.
  if (state.earlier?.some((t) => t.trim() === text.trim())) {
    return { status: 'already-sent', message: REFUSED_AS_SENT };
  }
  if (state.sent.length >= ctx.maxPerTurn) {
    return { status: 'limit', message: `at most ${ctx.maxPerTurn} messages per turn; stop sending` };
  }
  state.sent.push(text);
  const res = await writeOutbox(ctx, ctx.chatKey, ctx.fence, {
    runId: ctx.runId,
    text,
    ts: Date.now(),
    seen: ctx.seen?.() ?? '',
  });
  if (!res.ok) {
    state.sent.pop();
    ctx.onFencedOut();
    return { status: 'fenced-out' };
  }
  return { status: 'sent', id: res.id };
}
