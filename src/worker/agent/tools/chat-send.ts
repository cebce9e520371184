import { tool } from 'ai';
import { z } from 'zod';
import { toolInput } from './input.js';
import { writeOutbox } from './outbox.js';
import { sendWrite, type ToolTurn, turnOf } from './tool-turn.js';

export const CHAT_SEND_MAX_CHARS = 8000;

const REFUSED_AS_SENT =
  'Not sent: the person already received this exact text before a restart. Continue from there.';

// Built once (toolInput): the SDK converts a bare zod schema to JSON Schema again on every step.
const INPUT = toolInput(z.object({ text: z.string().min(1).max(CHAT_SEND_MAX_CHARS) }));

/**
 * `chat_send`: the model's only way to reach the user. Each write is fenced, so a turn that
 * lost its chat cannot speak; identical text in one turn is sent once, and so is text an
 * earlier run already sent before it crashed; a per-turn cap keeps a looping model from
 * flooding the chat. One per process: the turn comes with each call (tool-turn.ts).
 */
export const chatSendTool = tool({
  // Short: it is in every model request (docs/benchmarks.md, "Wrapper overhead"), and so is each word.
  description: 'Send one message to the user in this chat: the only way they see your reply.',
  inputSchema: INPUT,
  execute: async ({ text }, options) => {
    // A call whose step was aborted (a new message interrupted it, the turn ended) sends nothing.
    options.abortSignal?.throwIfAborted();
    return send(turnOf(options), text, options.toolCallId);
  },
});

export type ChatSendOutput =
  | { status: 'sent'; id: string }
  | { status: 'duplicate' }
  | { status: 'already-sent'; message: string }
  | { status: 'limit'; message: string }
  | { status: 'fenced-out' };

/** chat_send's fenced, deduplicated, capped send; also the turn's text-only fallback. */
export async function send(turn: ToolTurn, text: string, part?: string): Promise<ChatSendOutput> {
  const state = turn.sends;
  if (state.sent.includes(text)) return { status: 'duplicate' };
  // Not an error: the retried turn's model may well say the same thing again.
  if (state.earlier?.some((t) => t.trim() === text.trim())) {
    return { status: 'already-sent', message: REFUSED_AS_SENT };
  }
  if (state.sent.length >= turn.maxSendsPerTurn) {
    return { status: 'limit', message: `at most ${turn.maxSendsPerTurn} messages per turn; stop sending` };
  }
  state.sent.push(text);
  // The SDK runs a tool as its call is parsed, a few promise hops before its text part has
  // reached the reply writer; those hops are all done by the next macrotask. Then the part,
  // not yet written, goes with the item.
  if (turn.reply) await new Promise<void>((resolve) => setImmediate(resolve));
  const tail = turn.reply?.handOff();
  const res = await sendWrite(
    turn,
    () =>
      writeOutbox(turn, turn.chatKey, turn.fence, {
        runId: turn.runId,
        text,
        ts: Date.now(),
        seen: turn.seen(),
        part,
        reply: tail,
      }),
    () => {
      if (tail) turn.reply?.handedOff('failed');
    },
  );
  if (!res.ok) {
    state.sent.pop();
    turn.fencedOut('outbox fenced out');
    if (tail) turn.reply?.handedOff('fenced-out');
    return { status: 'fenced-out' };
  }
  if (tail) turn.reply?.handedOff(res.stop ? 'stop' : 'ok');
  turn.inboxChecked?.(res.arrived);
  return { status: 'sent', id: res.id };
}
