import { randomUUID } from 'node:crypto';
import { generateText, type LanguageModel } from 'ai';
import type { Logger } from '../../shared/logger.js';
import type { ChatMessage } from '../../shared/messages.js';
import { type ArchiveEntry, applyCompaction, rangeOf, readSnapshot } from '../../shared/store/archive.js';
import type { ChatStore } from '../../shared/store/chat-store.js';
import { withTokens } from '../../shared/tokens.js';
import { modelTelemetry } from '../../shared/tracing/spans.js';
import { type CallUsage, callUsage } from '../../shared/usage.js';
import { selectCut } from './cut.js';
import { SUMMARY_SYSTEM, updatePrompt } from './prompt.js';

export interface CompactionSettings {
  keepLast: number;
  keepRecentTokens: number;
  maxOutputTokens: number;
  archive: boolean;
  maxEvents: number;
  /** MAX_CHARS_PER_MESSAGE: token counts describe messages cut to this (see model-view.ts). */
  maxCharsPerMessage: number;
}

export interface CompactionDeps {
  store: ChatStore;
  model: LanguageModel;
  /** The configured compaction model (`provider:model`), for a call that names none. */
  modelName: string;
  settings: CompactionSettings;
  logger: Logger;
  onApplied?: (tokensSaved: number) => void;
}

export type CompactionResult =
  | { status: 'applied'; tokensBefore: number; tokensAfter: number; summaryId: string; replaced: number }
  | { status: 'nothing-to-cut' }
  | { status: 'noop' }
  | { status: 'stale'; reason: string };

/** The summary changed nothing because the history moved on: recompute (the job retries). */
export class StaleCompactionError extends Error {
  override name = 'StaleCompactionError';
}

/**
 * Summarise the head of one chat's history and swap it in with a compare-and-swap. Holds
 * no lease: turns keep running. Throws when the model fails — nothing is changed then, and
 * nothing lossy is ever written in place of a summary.
 */
export async function compactChat(deps: CompactionDeps, chatKey: string): Promise<CompactionResult> {
  const { store, settings } = deps;
  const snapshot = await readSnapshot(store, chatKey);
  const clip = settings.maxCharsPerMessage;
  const cut = selectCut(await Promise.all(snapshot.history.map((m) => withTokens(m, clip))), settings);
  if (!cut) return { status: 'nothing-to-cut' };

  const started = Date.now();
  const tokensBefore = cut.replaced.reduce((n, m) => n + (m.metadata.tokens ?? 0), 0);
  await store.appendEvent(chatKey, 'compaction.started', {
    messages: cut.newMessages.length,
    tokens: tokensBefore,
    previousSummaryId: cut.previousSummary?.id ?? null,
  });

  const { text, steps } = await generateText({
    model: deps.model,
    instructions: SUMMARY_SYSTEM,
    prompt: updatePrompt(cut.previousSummary, cut.newMessages),
    ...modelTelemetry('chatlane.compaction'),
    maxOutputTokens: settings.maxOutputTokens,
    maxRetries: 2,
  });
  // Written with the apply, whatever its outcome: a summary that is discarded was paid for too.
  // Each call by the model that served it (`provider:model`): a fallback model may have.
  const usage: CallUsage[] = steps.map((step) =>
    callUsage(step.response.modelId || step.model.modelId, step.usage),
  );
  const servedBy = usage.at(-1)?.model ?? deps.modelName;
  if (!text.trim()) throw new Error('the model returned an empty summary');

  const sourceRange = rangeOf(cut.newMessages);
  const summary: ChatMessage = await withTokens(
    {
      id: `summary-${randomUUID()}`,
      role: 'assistant',
      parts: [{ type: 'text', text: text.trim() }],
      metadata: {
        ts: Date.now(),
        chatKey,
        kind: 'summary',
        sourceRange,
        ...(cut.previousSummary ? { previousSummaryId: cut.previousSummary.id } : {}),
      },
    },
    clip,
  );
  const archive: ArchiveEntry | undefined = settings.archive
    ? {
        id: `archive-${randomUUID()}`,
        kind: 'compaction',
        createdAt: Date.now(),
        sourceRange,
        summaryId: summary.id,
        messages: cut.newMessages,
      }
    : undefined;

  const res = await applyCompaction(store, chatKey, {
    expectedVersion: snapshot.version,
    replaced: cut.replaced,
    summary,
    archive,
    maxEvents: settings.maxEvents,
    usage,
    eventData: {
      summaryId: summary.id,
      sourceRange,
      model: servedBy,
      ms: Date.now() - started,
      summaryTokens: summary.metadata.tokens ?? 0,
      replacedTokens: tokensBefore,
    },
  });
  if (res.status === 'noop') return res;
  if (res.status === 'stale') return res;
  const tokensAfter = summary.metadata.tokens ?? 0;
  deps.onApplied?.(tokensBefore - tokensAfter);
  deps.logger.info(
    { chatKey, replaced: cut.replaced.length, tokensBefore, tokensAfter },
    'compaction applied',
  );
  return {
    status: 'applied',
    tokensBefore,
    tokensAfter,
    summaryId: summary.id,
    replaced: cut.replaced.length,
  };
}
