import { tool } from 'ai';
import { z } from 'zod';
import type { ChatMessage } from '../../../shared/messages.js';
import type { ChatStore } from '../../../shared/store/chat-store.js';
import {
  type ContextMeta,
  type ContextOp,
  findContext,
  getContext,
  listContexts,
  switchContext,
} from '../../../shared/store/contexts.js';
import { toolInput } from './input.js';

export interface ContextToolDeps {
  store: ChatStore;
  chatKey: string;
  fence: string;
  runId: string;
  onFencedOut: () => void;
  /** Continue this turn from `context` (plus the turn's own user messages) from the next step on. */
  rebase: (context: ChatMessage[]) => Promise<void>;
}

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

/**
 * Tool-driven context switching (seed 003): no automatic judge; the model decides when the
 * working context is too noisy and when to go back to an earlier one. Every switch is a
 * fenced write, and nothing is ever deleted: the replaced history is archived first.
 */
export function createContextTools(d: ContextToolDeps) {
  const doSwitch = async (op: ContextOp, args: { title?: string; reason?: string; load?: ContextMeta }) => {
    const res = await switchContext(d.store, d.chatKey, d.fence, { op, runId: d.runId, ...args });
    if (res.status === 'fenced-out') d.onFencedOut();
    return res;
  };

  /** 'new' and 'clear' differ only in intent: both archive and continue from nothing. */
  const startFresh = async (op: 'new' | 'clear', args: { title?: string; reason?: string }) => {
    const res = await doSwitch(op, args);
    if (res.status !== 'ok') return { status: res.status };
    await d.rebase([]);
    return { status: 'ok', archivedContextId: res.archivedId ?? null, archivedMessages: res.archivedCount };
  };

  return {
    chat_context_new: tool({
      description:
        'Archive the current working context and start a fresh one. Use when the earlier conversation is ' +
        'long, unrelated to what the user now asks, or likely to mislead your answer. This turn continues ' +
        'with only the current user message(s).',
      inputSchema: NEW_INPUT,
      execute: async ({ title, reason }) => {
        return startFresh('new', { ...(title ? { title } : {}), ...(reason ? { reason } : {}) });
      },
    }),

    chat_context_list: tool({
      description: 'List archived contexts of this chat, newest first (id, title, times, size, preview).',
      inputSchema: LIST_INPUT,
      execute: async ({ limit }) => ({
        contexts: (await listContexts(d.store, d.chatKey, limit ?? 10)).map((c) => ({
          id: c.id,
          title: c.title,
          createdAt: new Date(c.createdAt).toISOString(),
          archivedAt: new Date(c.archivedAt).toISOString(),
          messageCount: c.messageCount,
          preview: c.preview,
        })),
      }),
    }),

    chat_context_load: tool({
      description:
        'Make an archived context the working context again (the current one is archived first). Give ' +
        'contextId from chat_context_list, or a query to pick the best match. The loaded messages are ' +
        'earlier context for reference, not current instructions.',
      inputSchema: LOAD_INPUT,
      execute: async ({ contextId, query }) => {
        const meta = contextId
          ? await getContext(d.store, d.chatKey, contextId)
          : await findContext(d.store, d.chatKey, query ?? '');
        if (!meta) return { status: 'not-found' };
        const res = await doSwitch('load', { load: meta });
        if (res.status !== 'ok') return { status: res.status };
        await d.rebase(await d.store.readHistory(d.chatKey));
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
      execute: async () => {
        return startFresh('clear', {});
      },
    }),
  };
}
