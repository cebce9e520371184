import {
  generateText,
  type LanguageModel,
  type ModelMessage,
  type PrepareStepFunction,
  stepCountIs,
  type ToolSet,
  type UIMessage,
} from 'ai';
import type { Logger } from '../../shared/logger.js';
import { modelTelemetry } from '../../shared/tracing/spans.js';
import type { MergePoint } from './interleave.js';
import type { TurnAbort } from './turn-abort.js';
import { stepsToUIParts } from './ui-parts.js';

export interface LoopInput<T> {
  model: LanguageModel;
  system: string;
  messages: ModelMessage[];
  tools: ToolSet;
  /** The names of `tools` the model is offered (all when absent); fixed for the whole loop. */
  activeTools?: string[];
  /** Handed to every tool's execute as `experimental_context` (the turn's state: tool-turn.ts). */
  toolContext?: unknown;
  maxSteps: number;
  maxMerges: number;
  /**
   * The turn's one AbortController: its signal is the SDK's; it is ended when the lane is lost
   * or stopped, and the loop times each step on it (`stepTimeoutMs`).
   */
  abort: TurnAbort;
  responseId: string;
  logger: Logger;
  /**
   * Messages that arrived since the turn began (at most `max`), oldest first. `responses` are
   * the turn's step responses so far (tool calls and results), which the next request carries
   * on top of the assembled input: the callee merges only what still fits the token budget.
   */
  nextArrivals: (max: number, responses: readonly ModelMessage[]) => Promise<T[]>;
  /** How arrivals look to the model. */
  toModel: (items: T[]) => Promise<ModelMessage[]>;
  maxRetries?: number;
  /** Per model step: a hung provider must not hold the chat's lane forever. */
  stepTimeoutMs?: number;
  control?: LoopControl;
  /** Fetches file parts' URLs for the model (the safe download); the SDK's own when absent. */
  download?: DownloadFunction;
}

/** The AI SDK's download hook (experimental_download). */
export type DownloadFunction = NonNullable<Parameters<typeof generateText>[0]['experimental_download']>;

/**
 * Set by tools between steps. `rebase` replaces the turn's initial messages (the history
 * the turn started with) from the next step on: a context switch (seed 003) continues with
 * the new context plus this turn's own messages.
 */
export interface LoopControl {
  rebase?: ModelMessage[];
}

export interface LoopResult<T> {
  /** The turn's assistant UIMessage: tool parts and `step-start` markers included. */
  response: UIMessage;
  merges: MergePoint<T>[];
  /** Text of the final step (the fallback reply when the model never called chat_send). */
  finalText: string;
  steps: number;
  usage: { inputTokens: number; outputTokens: number };
}

interface Merge<T> extends MergePoint<T> {
  /** Index in the SDK's step messages (initial + responses) where the arrivals go. */
  at: number;
  modelMessages: ModelMessage[];
}

/**
 * The AI SDK tool loop with lane merge: between steps, messages that arrived mid-turn are
 * handed to the model as ordinary user messages. The SDK rebuilds each step's messages from
 * the initial ones plus responses, so every step re-inserts all earlier merges at the
 * positions where they first appeared.
 *
 * Not an async function: what follows the SDK's loop is chained to its promise, so no frame
 * of ours (generator, registers, await closures) is held through every model call of the turn.
 */
export function runLoop<T>(input: LoopInput<T>): Promise<LoopResult<T>> {
  const merges: Merge<T>[] = [];
  let merged = 0;
  const initialLength = input.messages.length;
  let base: ModelMessage[] | undefined;

  // The SDK's abort signal is the turn's, which a step running past stepTimeoutMs aborts too.
  // Every check below reads whether the turn was *ended* (lost or stopped): a timed-out step is
  // thrown by the SDK as the model's error, never mistaken for a lost or stopped lane.
  const { abort, stepTimeoutMs } = input;
  abort.beginLoop();

  const prepareStep: PrepareStepFunction<ToolSet> = async ({ stepNumber, messages }) => {
    if (stepTimeoutMs) abort.armStep(stepTimeoutMs);
    if (stepNumber > 0 && merged < input.maxMerges && !abort.ended) {
      try {
        const items = await input.nextArrivals(input.maxMerges - merged, messages.slice(initialLength));
        if (items.length > 0) {
          merges.push({ stepNumber, items, at: messages.length, modelMessages: await input.toModel(items) });
          merged += items.length;
        }
      } catch (err) {
        // A failed read only delays those messages to the next turn; it must not fail this one.
        input.logger.warn({ err }, 'lane merge read failed');
      }
    }
    if (input.control?.rebase) {
      base = input.control.rebase;
      input.control.rebase = undefined;
    }
    if (merges.length === 0 && !base) return {};
    const out: ModelMessage[] = [];
    let cursor = 0;
    for (const m of merges) {
      out.push(...messages.slice(cursor, m.at), ...m.modelMessages);
      cursor = m.at;
    }
    out.push(...messages.slice(cursor));
    // Merges always sit after the initial messages, so the first initialLength are exactly those.
    return { messages: base ? [...base, ...out.slice(initialLength)] : out };
  };

  return generateText({
    model: input.model,
    system: input.system,
    messages: input.messages,
    tools: input.tools,
    ...(input.activeTools && { activeTools: input.activeTools }),
    ...(input.toolContext !== undefined && { experimental_context: input.toolContext }),
    stopWhen: stepCountIs(input.maxSteps),
    prepareStep,
    abortSignal: abort.signal,
    ...(stepTimeoutMs && { onStepFinish: () => abort.disarmStep() }),
    maxRetries: input.maxRetries ?? 2,
    // Step results would otherwise keep every request and response body until the turn
    // ends: at 2,000 turns in flight that was ~90 MB of RSS nobody reads.
    experimental_include: { requestBody: false, responseBody: false },
    ...(input.download && { experimental_download: input.download }),
    // Tracing on: the SDK's spans of the call, each step and each tool call (gen_ai.*).
    ...modelTelemetry('chatlane.turn'),
  }).then(
    (result) => {
      abort.disarmStep();
      if (abort.ended) throw abort.ended;
      const { steps, totalUsage: usage } = result;
      const last = steps.at(-1);
      return {
        response: { id: input.responseId, role: 'assistant', parts: stepsToUIParts(steps) },
        merges: merges.map(({ stepNumber, items }) => ({ stepNumber, items })),
        finalText: last?.text ?? '',
        steps: steps.length,
        usage: { inputTokens: usage.inputTokens ?? 0, outputTokens: usage.outputTokens ?? 0 },
      };
    },
    (err: unknown) => {
      abort.disarmStep();
      throw abort.ended ?? err;
    },
  );
}
