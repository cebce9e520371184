import type { ChatMessage } from '../../shared/messages.js';
import { RETRIEVED_PART, type RetrievedDocument, type RetrievedPart } from '../../shared/retrieved.js';
import type { Assembler, Compressor, Provider, ProviderResult } from './types.js';

/**
 * A program's own pipeline stages (DESIGN §6): for each of the Provider, the Compressor and
 * the Assembler, either a replacement or a function that receives chatlane's default and
 * returns what the turn uses instead, usually a wrapper around it.
 */

/** A stage given in code: a replacement, or a function of the default returning its wrapper. */
export type StageOption<T> = T | ((defaults: T) => T);

/**
 * The pipeline's stages given in code. Each is optional; absent, chatlane's default. A
 * function receives the default (built from the configuration) and returns the stage the
 * turn uses: a wrapper keeps what it does not change.
 *
 * @example
 * ```ts
 * const stages: Stages = {
 *   // Documents retrieved for the person's newest message, on that message (after the history).
 *   provider: (defaults) => ({
 *     reads: defaults.reads,
 *     async load(chatKey, read) {
 *       const input = await defaults.load(chatKey, read);
 *       return withRetrieved(input, await search(messageText(input.pending.at(-1)!.message)));
 *     },
 *   }),
 *   // Leave 2,000 tokens of the budget for a long answer.
 *   compressor: (defaults) => ({ compress: (messages, budget) => defaults.compress(messages, budget - 2000) }),
 * };
 * ```
 */
export interface Stages {
  provider?: StageOption<Provider>;
  compressor?: StageOption<Compressor>;
  assembler?: StageOption<Assembler>;
}

/** The three stages a turn runs. */
export interface PipelineStages {
  provider: Provider;
  compressor: Compressor;
  assembler: Assembler;
}

/** A stage given in code lacks what the turn calls: thrown at start, naming the stage and the member. */
export class StageError extends TypeError {
  override name = 'StageError';
}

/** The methods the turn calls on each stage (and the Provider's `reads`). */
const MEMBERS: { [K in keyof PipelineStages]: ReadonlyArray<keyof PipelineStages[K]> } = {
  provider: ['load'],
  compressor: ['compress'],
  assembler: ['systemTokens', 'assemble', 'toModel'],
};

/**
 * The stages a turn runs: each of `stages` applied to its default (a replacement taken as it
 * is, a function called with the default). Checked here, once at start, so a stage missing a
 * method fails the process's start with a `StageError` naming it, never a turn.
 */
export function applyStages(defaults: PipelineStages, stages: Stages = {}): PipelineStages {
  return {
    provider: applyOne('provider', defaults.provider, stages.provider),
    compressor: applyOne('compressor', defaults.compressor, stages.compressor),
    assembler: applyOne('assembler', defaults.assembler, stages.assembler),
  };
}

function applyOne<K extends keyof PipelineStages>(
  name: K,
  fallback: PipelineStages[K],
  given: StageOption<PipelineStages[K]> | undefined,
): PipelineStages[K] {
  if (given === undefined) return fallback;
  const stage = typeof given === 'function' ? given(fallback) : given;
  if (typeof stage !== 'object' || stage === null) {
    throw new StageError(
      `stages.${name}: expected a ${name} object, got ${stage === null ? 'null' : typeof stage}`,
    );
  }
  for (const member of MEMBERS[name]) {
    if (typeof stage[member] !== 'function') {
      throw new StageError(`stages.${name}: ${String(member)}() is missing`);
    }
  }
  if (name === 'provider') checkReads(stage as Provider);
  return stage;
}

function checkReads(provider: Provider): void {
  const reads = provider.reads as Partial<Provider['reads']> | undefined;
  const counts = [reads?.windowMessages, reads?.maxPending];
  if (!counts.every((n) => Number.isInteger(n) && (n as number) >= 0)) {
    throw new StageError(
      'stages.provider: reads must be { windowMessages, maxPending } (a wrapper passes on the reads of the provider it wraps)',
    );
  }
}

/**
 * `input` with `documents` added to this turn's newest pending message, as retrieved parts
 * (`data-retrieved`): the model reads them after the history and after what the person
 * wrote, each under a label that names its source and says it is reference. They are stored
 * with the message when the turn commits, so every later request shows the message the same
 * and the prompt cache holds; and they are counted in the message's tokens (its old count is
 * dropped and the turn counts it anew), so the Compressor cuts older history to fit them.
 * Keep them small: the newest message is kept whatever the budget. No documents, or no
 * pending message: `input` unchanged.
 */
export function withRetrieved(
  input: ProviderResult,
  documents: readonly RetrievedDocument[],
): ProviderResult {
  const last = input.pending.at(-1);
  if (!last || documents.length === 0) return input;
  const message: ChatMessage = {
    ...last.message,
    parts: [
      ...last.message.parts,
      ...documents.map(
        (d): RetrievedPart => ({
          type: RETRIEVED_PART,
          data: d.source === undefined ? { text: d.text } : { text: d.text, source: d.source },
        }),
      ),
    ],
    metadata: withoutCount(last.message.metadata),
  };
  return { ...input, pending: [...input.pending.slice(0, -1), { streamId: last.streamId, message }] };
}

function withoutCount(metadata: ChatMessage['metadata']): ChatMessage['metadata'] {
  const { tokens: _tokens, tokensMaxChars: _max, ...rest } = metadata;
  return rest as ChatMessage['metadata'];
}
