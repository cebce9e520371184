import { tool } from 'ai';
import { z } from 'zod';
import {
  type ContextMeta,
  type ContextOp,
  findContext,
  getContext,
  listContexts,
  switchContext,
} from '../../../shared/store/contexts.js';
import { toolInput } from './input.js';
import { type ToolTurn, turnOf } from './tool-turn.js';

// Built once (toolInput): the SDK converts a bare zod schema to JSON Schema again on every step.
const NEW_INPUT = toolInput(
  z.object({ title: z.string().max(120).optional(), reason: z.string().max(500).optional() }),
);
const LIST_INPUT = toolInput(z.object({ limit: z.number().int().min(1).max(50).optional() }));
const LOAD_INPUT = toolInput(
  z
    .object({ contextId: z.string().max(40).optional(), query: z.string().max(500).optional() })
    .refine((v) => v.contextId || v.query, 'give contextId or query'),
);
const CLEAR_INPUT = toolInput(z.object({}));

type SwitchArgs = { title?: string; reason?: string; load?: ContextMeta };

async function doSwitch(turn: ToolTurn, op: ContextOp, args: SwitchArgs) {
  const res = await switchContext(turn.store, turn.chatKey, turn.fence, { op, runId: turn.runId, ...args });
  if (res.status === 'fenced-out') turn.fencedOut('context switch fenced out');
  return res;
}

/** 'new' and 'clear' differ only in intent: both archive and continue from nothing. */
async function startFresh(turn: ToolTurn, op: 'new' | 'clear', args: SwitchArgs) {
  const res = await doSwitch(turn, op, args);
  if (res.status !== 'ok') return { status: res.status };
  await turn.rebase([]);
  return { status: 'ok', archivedContextId: res.archivedId ?? null, archivedMessages: res.archivedCount };
}

/**
 * Tool-driven context switching (seed 003): no automatic judge; the model decides when the
 * working context is too noisy and when to go back to an earlier one. Every switch is a
 * fenced write, and nothing is ever deleted: the replaced history is archived first.
 * One set per process: the turn comes with each call (tool-turn.ts).
 */
export const contextTools = {
  chat_context_new: tool({
    // When to use it is the prompt's working-context guidance, there whenever this tool is offered.
    description:
      'Archive the working context (nothing is lost) and start a fresh one; this turn continues ' +
      'with only the current user message(s).',
    inputSchema: NEW_INPUT,
    execute: async ({ title, reason }, options) =>
      startFresh(turnOf(options), 'new', { ...(title ? { title } : {}), ...(reason ? { reason } : {}) }),
  }),

  chat_context_list: tool({
    description: 'List archived contexts of this chat, newest first (id, title, times, size, preview).',
    inputSchema: LIST_INPUT,
    execute: async ({ limit }, options) => {
      const { store, chatKey } = turnOf(options);
      return {
        contexts: (await listContexts(store, chatKey, limit ?? 10)).map((c) => ({
          id: c.id,
          title: c.title,
          createdAt: new Date(c.createdAt).toISOString(),
          archivedAt: new Date(c.archivedAt).toISOString(),
          messageCount: c.messageCount,
          preview: c.preview,
        })),
      };
    },
  }),

  chat_context_load: tool({
    description:
      'Make an archived context the working context again (the current one is archived first). Give ' +
      'contextId from chat_context_list, or a query to pick the best match. The loaded messages are ' +
      'earlier context for reference, not current instructions.',
    inputSchema: LOAD_INPUT,
    execute: async ({ contextId, query }, options) => {
      const turn = turnOf(options);
      const meta = contextId
        ? await getContext(turn.store, turn.chatKey, contextId)
        : await findContext(turn.store, turn.chatKey, query ?? '');
      if (!meta) return { status: 'not-found' };
      const res = await doSwitch(turn, 'load', { load: meta });
      if (res.status !== 'ok') return { status: res.status };
      await turn.rebase(await turn.store.readHistory(turn.chatKey));
      return {
        status: 'ok',
        loadedContextId: meta.id,
        title: meta.title,
        loadedMessages: res.loadedCount,
        archivedContextId: res.archivedId ?? null,
      };
    },
  }),

  chat_context_clear_active: tool({
    description: 'Archive (never delete) and clear the working context.',
    inputSchema: CLEAR_INPUT,
    execute: async (_input, options) => startFresh(turnOf(options), 'clear', {}),
  }),
};
