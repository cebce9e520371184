import {
  type LanguageModel,
  type ModelMessage,
  type PrepareStepFunction,
  type StepResult,
  stepCountIs,
  streamText,
  type TextStreamPart,
  type ToolSet,
  type UIMessage,
} from 'ai';
import type { Logger } from '../../shared/logger.js';
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
  /** Every part of the model's stream, in order, as it is generated (the reply stream's source). */
  onPart?: (part: TextStreamPart<ToolSet>) => Promise<void> | void;
  /** Arrivals merged into the turn, right after they are taken. */
  onMerge?: (items: T[]) => void;
}

/** The AI SDK's download hook (experimental_download). */
export type DownloadFunction = NonNullable<Parameters<typeof streamText>[0]['experimental_download']>;

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
  /** A stop request ended the loop: the result holds the steps that had finished. */
  stopped?: boolean;
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
          input.onMerge?.(items);
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

  // The steps that finished, kept as they finish: a stopped turn commits those.
  const steps: StepResult<ToolSet>[] = [];
  const result = streamText({
    model: input.model,
    system: input.system,
    messages: input.messages,
    tools: input.tools,
    ...(input.activeTools && { activeTools: input.activeTools }),
    ...(input.toolContext !== undefined && { experimental_context: input.toolContext }),
    stopWhen: stepCountIs(input.maxSteps),
    prepareStep,
    abortSignal: abort.signal,
    onStepFinish: (step) => {
      steps.push(step);
      if (stepTimeoutMs) abort.disarmStep();
    },
    // Errors arrive as the stream's error parts, read below (the default would print them).
    onError: () => undefined,
    maxRetries: input.maxRetries ?? 2,
    // Step results would otherwise keep every request body until the turn ends: at 2,000
    // turns in flight that was ~90 MB of RSS nobody reads.
    experimental_include: { requestBody: false },
    ...(input.download && { experimental_download: input.download }),
  });
  const done = (stopped: boolean): LoopResult<T> => {
    const last = steps.at(-1);
    let inputTokens = 0;
    let outputTokens = 0;
    for (const step of steps) {
      inputTokens += step.usage.inputTokens ?? 0;
      outputTokens += step.usage.outputTokens ?? 0;
    }
    return {
      response: { id: input.responseId, role: 'assistant', parts: stepsToUIParts(steps) },
      merges: merges.map(({ stepNumber, items }) => ({ stepNumber, items })),
      finalText: last?.text ?? '',
      steps: steps.length,
      usage: { inputTokens, outputTokens },
      ...(stopped && { stopped }),
    };
  };

  return consume(result.fullStream, input).then(
    (failure) => {
      abort.disarmStep();
      if (abort.stoppedByRequest) return done(true);
      if (abort.ended) throw abort.ended;
      if (failure !== undefined) throw failure;
      // A step that ran out is aborted, not failed, in the stream: thrown as the SDK's TimeoutError.
      if (abort.timedOut) throw abort.signal.reason;
      return done(false);
    },
    (err: unknown) => {
      abort.disarmStep();
      if (abort.stoppedByRequest) return done(true);
      throw abort.ended ?? err;
    },
  );
}

/** Read the model's stream to its end, handing each part on; resolves with its first error, if any. */
async function consume<T>(
  stream: AsyncIterable<TextStreamPart<ToolSet>>,
  input: Pick<LoopInput<T>, 'onPart' | 'logger'>,
): Promise<unknown> {
  let failure: unknown;
  for await (const part of stream) {
    if (part.type === 'error') {
      failure ??= part.error;
      continue;
    }
    if (!input.onPart) continue;
    try {
      await input.onPart(part);
    } catch (err) {
      // The live view must not fail the turn.
      input.logger.warn({ err }, 'stream part handler failed');
    }
  }
  return failure;
}
