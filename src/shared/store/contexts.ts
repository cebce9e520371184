import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { contextMessagesKey } from '../keys.js';
import { type ChatMessage, messageText, parseStoredMessage } from '../messages.js';
import { parseJsonAs } from '../parse-json.js';
import { storedJson } from '../storable.js';
import { countTextTokens } from '../tokens.js';
import type { ChatStore } from './chat-store.js';
import { scripts } from './scripts.js';

/**
 * Context snapshots (seed 003): the working history archived whole, listable, loadable.
 * The switch itself is one fenced script; this module prepares its inputs and reads.
 */

export const CONTEXT_ID = /^ctx-[0-9a-f]{12}$/;
const PREVIEW_CHARS = 160;

export const contextMetaSchema = z.object({
  id: z.string(),
  title: z.string(),
  reason: z.string().optional(),
  createdAt: z.number(),
  archivedAt: z.number(),
  messageCount: z.number(),
  tokens: z.number().optional(),
  preview: z.string(),
  checkpoint: z.string().optional(),
});
export type ContextMeta = z.infer<typeof contextMetaSchema>;

export type ContextOp = 'new' | 'clear' | 'load';

export interface SwitchRequest {
  op: ContextOp;
  title?: string | undefined;
  reason?: string | undefined;
  /** The snapshot to load, as getContext/findContext resolved it (op 'load' only). */
  load?: ContextMeta | undefined;
  /** The turn's runId, or the operator request id. */
  runId: string;
}

export type SwitchResult =
  | { status: 'ok'; archivedId: string | undefined; archivedCount: number; loadedCount: number }
  | { status: 'fenced-out' }
  | { status: 'not-found' };

export function newContextId(): string {
  return `ctx-${randomBytes(6).toString('hex')}`;
}

const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

/** What a snapshot is about, from its first and last messages (read in one round trip). */
async function describeHistory(store: ChatStore, chatKey: string) {
  const k = store.keys(chatKey);
  const [head, tail] = await Promise.all([
    store.redis.lrange(k.hist, 0, 4),
    store.redis.lrange(k.hist, -10, -1),
  ]);
  const first = head.map(parseStoredMessage).find((m) => m.role === 'user' && m.metadata.kind !== 'summary');
  const lastAssistant = tail
    .map(parseStoredMessage)
    .reverse()
    .find((m) => m.role === 'assistant');
  const preview = clip(first ? messageText(first).replace(/\s+/g, ' ').trim() : '', PREVIEW_CHARS);
  return { preview, checkpoint: lastAssistant?.id, createdAt: first?.metadata.ts };
}

export function contextMarker(chatKey: string, meta: ContextMeta): ChatMessage {
  const text =
    `[The messages above are an earlier context, "${meta.title}" (${meta.id}), loaded for reference. ` +
    'They may be out of date and are not current instructions; the conversation continues below.]';
  return {
    id: `marker-${meta.id}-${Date.now()}`,
    role: 'assistant',
    parts: [{ type: 'text', text }],
    metadata: {
      ts: Date.now(),
      chatKey,
      kind: 'normal',
      tokens: countTextTokens(text) + 4,
      extra: { contextMarker: meta.id },
    },
  };
}

export async function switchContext(
  store: ChatStore,
  chatKey: string,
  fence: string,
  req: SwitchRequest,
): Promise<SwitchResult> {
  const k = store.keys(chatKey);
  const id = newContextId();
  const about = await describeHistory(store, chatKey);
  const now = Date.now();
  const meta = {
    id,
    title: clip(req.title?.trim() || about.preview || 'untitled context', 120),
    ...(req.reason ? { reason: clip(req.reason, 500) } : {}),
    createdAt: about.createdAt ?? now,
    preview: about.preview,
    ...(about.checkpoint ? { checkpoint: about.checkpoint } : {}),
  };
  let marker = '';
  let markerTokens = 0;
  const load = req.op === 'load' ? req.load : undefined;
  if (req.op === 'load') {
    if (!load) return { status: 'not-found' };
    const m = contextMarker(chatKey, load);
    marker = storedJson(m, { tooDeep: 'clip' });
    markerTokens = m.metadata.tokens ?? 0;
  }
  const evict = await oldestBeyondCap(store, chatKey, load?.id);
  const newKey = contextMessagesKey(store.prefix, chatKey, id);
  // The script re-checks that the snapshot exists before it changes anything.
  const loadKey = load ? contextMessagesKey(store.prefix, chatKey, load.id) : newKey;
  const raw = (await scripts.contextSwitch.run(
    store.redis,
    [
      k.meta,
      k.hist,
      k.contexts,
      k.events,
      newKey,
      loadKey,
      ...evict.map((e) => contextMessagesKey(store.prefix, chatKey, e)),
    ],
    [
      fence,
      req.op,
      id,
      storedJson(meta, { tooDeep: 'clip' }),
      load?.id ?? '',
      marker,
      markerTokens,
      store.maxEvents,
      req.runId,
      store.retention.contextsMax,
      ...evict,
    ],
    store.events,
  )) as [string, ...Array<string | number>];
  if (raw[0] === 'fenced-out') return { status: 'fenced-out' };
  if (raw[0] === 'not-found') return { status: 'not-found' };
  return {
    status: 'ok',
    archivedId: raw[1] ? String(raw[1]) : undefined,
    archivedCount: Number(raw[2]),
    loadedCount: Number(raw[3]),
  };
}

/**
 * Snapshots the switch may drop (CONTEXTS_MAX), oldest first: those that would be over the
 * cap once one more is added, never the one being loaded. The script re-checks the count.
 */
async function oldestBeyondCap(store: ChatStore, chatKey: string, loading?: string): Promise<string[]> {
  const all = await store.redis.hgetall(store.keys(chatKey).contexts);
  const over = Object.keys(all).length + 1 - store.retention.contextsMax;
  if (over <= 0) return [];
  return Object.entries(all)
    .filter(([id]) => id !== loading && CONTEXT_ID.test(id))
    .map(([id, json]) => ({ id, at: parseMeta(json)?.archivedAt ?? 0 }))
    .sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : 1))
    .slice(0, over)
    .map((e) => e.id);
}

function parseMeta(json: string | null | undefined): ContextMeta | undefined {
  return parseJsonAs(contextMetaSchema, json);
}

export async function getContext(
  store: ChatStore,
  chatKey: string,
  id: string,
): Promise<ContextMeta | undefined> {
  if (!CONTEXT_ID.test(id)) return undefined;
  return parseMeta(await store.redis.hget(store.keys(chatKey).contexts, id));
}

/** Snapshots, newest first. */
export async function listContexts(store: ChatStore, chatKey: string, limit: number): Promise<ContextMeta[]> {
  const all = await store.redis.hvals(store.keys(chatKey).contexts);
  return all
    .map(parseMeta)
    .filter((m): m is ContextMeta => m !== undefined)
    .sort((a, b) => b.archivedAt - a.archivedAt)
    .slice(0, limit);
}

export async function getContextMessages(
  store: ChatStore,
  chatKey: string,
  id: string,
): Promise<ChatMessage[]> {
  if (!CONTEXT_ID.test(id)) return [];
  const raw = await store.redis.lrange(contextMessagesKey(store.prefix, chatKey, id), 0, -1);
  return raw.map(parseStoredMessage);
}

/** How many snapshots and messages per snapshot a query search reads: bounds its cost. */
const SEARCH_CONTEXTS = 50;
const SEARCH_MESSAGES = 300;

/**
 * Best-effort: the snapshot whose title, preview and messages match the most query terms
 * (title hits count double); newer wins ties.
 */
export async function findContext(
  store: ChatStore,
  chatKey: string,
  query: string,
): Promise<ContextMeta | undefined> {
  const terms = [
    ...new Set(
      query
        .toLowerCase()
        .split(/[^\p{L}\p{N}]+/u)
        .filter((t) => t.length > 1),
    ),
  ];
  if (terms.length === 0) return undefined;
  const candidates = await listContexts(store, chatKey, SEARCH_CONTEXTS);
  let best: { meta: ContextMeta; score: number } | undefined;
  for (const meta of candidates) {
    const raw = await store.redis.lrange(
      contextMessagesKey(store.prefix, chatKey, meta.id),
      -SEARCH_MESSAGES,
      -1,
    );
    const body = raw
      .map((j) => messageText(parseStoredMessage(j)))
      .join('\n')
      .toLowerCase();
    const head = `${meta.title}\n${meta.reason ?? ''}\n${meta.preview}`.toLowerCase();
    const score = terms.reduce((n, t) => n + (head.includes(t) ? 2 : 0) + (body.includes(t) ? 1 : 0), 0);
    if (score > 0 && (!best || score > best.score)) best = { meta, score };
  }
  return best?.meta;
}
