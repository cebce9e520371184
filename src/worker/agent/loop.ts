import {
  type Experimental_SandboxSession,
  generateText,
  isStepCount,
  type LanguageModel,
  type ModelMessage,
  type PrepareStepFunction,
  type StepResult,
  type SystemModelMessage,
  streamText,
  type TextStreamPart,
  type ToolApprovalConfiguration,
  type ToolSet,
  type UIMessage,
} from 'ai';
import type { Logger } from '../../shared/logger.js';
import { modelTelemetry } from '../../shared/tracing/spans.js';
import { callUsage, type UsageTally } from '../../shared/usage.js';
import type { MergePoint } from './interleave.js';
import type { StepInterrupt } from './step-interrupt.js';
import type { TurnAbort } from './turn-abort.js';
import { stepsToUIParts } from './ui-parts.js';

export interface LoopInput<T> {
  model: LanguageModel;
  /** One text, or system messages (each may carry provider options: a cache point). */
  system: string | SystemModelMessage[];
  messages: ModelMessage[];
  /** Call-level provider options (the prompt cache key). */
  providerOptions?: SystemModelMessage['providerOptions'];
  tools: ToolSet;
  /** The names of `tools` the model is offered (all when absent); fixed for the whole loop. */
  activeTools?: string[];
  /**
   * Each tool's `context`, by tool name (AI SDK 7 `toolsContext`: a tool gets only its own
   * entry): the turn's state for chatlane's own tools (tool-turn.ts), the chat's context for
   * the tools given in code (custom-tools.ts), nothing for an operator's MCP tools.
   */
  toolsContext?: Record<string, unknown>;
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
   * `fresh`: an interrupt asks, so the inbox must be read now (no earlier look stands in).
   */
  nextArrivals: (max: number, responses: readonly ModelMessage[], fresh?: boolean) => Promise<T[]>;
  /** How arrivals look to the model. */
  toModel: (items: T[]) => Promise<ModelMessage[]>;
  maxRetries?: number;
  /** Per model step: a hung provider must not hold the chat's lane forever. */
  stepTimeoutMs?: number;
  control?: LoopControl;
  /** Fetches file parts' URLs for the model (the safe download); the SDK's own when absent. */
  download?: DownloadFunction;
  /**
   * Every finished step's usage, with the model that served it, is added here as the step
   * ends: a turn that fails later still knows what it paid for.
   */
  usage?: UsageTally;
  /**
   * Every part of the model's stream, in order, as it is generated (the reply stream's source).
   * Synchronous: it runs for every part, and awaiting it would cost a promise per part.
   * Given, the loop streams (`streamText`); absent, nobody watches the turn and it calls
   * `generateText` with the same options: the stream and its consumer cost about as much CPU
   * again as the rest of the call.
   */
  onPart?: (part: TextStreamPart<ToolSet>) => void;
  /** Arrivals merged into the turn, right after they are taken. */
  onMerge?: (items: T[]) => void;
  /**
   * LANE_POLICY=interrupt: the turn's interrupt, raised by the lane when a message arrives
   * during a model call; the loop then runs the step again with the arrivals folded in.
   */
  interrupt?: StepInterrupt;
  /**
   * A step's model call was aborted by an interrupt; `items` are the arrivals its restart
   * carries (merged: `onMerge` follows), `stepNumber` the step restarted. Called before the
   * restarted call begins: the aborted part of the live view is closed here.
   */
  onInterrupt?: (items: T[], stepNumber: number) => void;
  /** EXEC_SHELL=on: the chat's workspace as the AI SDK's sandbox session, for tools that run in one. */
  sandbox?: Experimental_SandboxSession;
  /**
   * Which calls wait for a person (approval/rules.ts), and the key their requests are signed
   * with: an input ending in approval answers (approval/plan.ts) makes the SDK run the
   * approved calls, and record the denied ones, before the first step.
   */
  toolApproval?: ToolApprovalConfiguration<ToolSet, Record<string, unknown>>;
  toolApprovalSecret?: string;
}

/** How a call answered before the first step ended: the SDK ran it (approved) or recorded its denial. */
export type ResumedCall =
  | { toolCallId: string; kind: 'result'; output: unknown }
  | { toolCallId: string; kind: 'error'; error: string }
  | { toolCallId: string; kind: 'denied' };

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
  /** The model (provider:model) that served each step, in order (fallback can change it mid-turn). */
  models: string[];
  usage: { inputTokens: number; outputTokens: number };
  /** A stop request ended the loop: the result holds the steps that had finished. */
  stopped?: boolean;
  /** Approved and denied calls the SDK settled before the first step (approval answers in the input). */
  resumed: ResumedCall[];
}

/**
 * The AI SDK tool loop with lane merge: between steps, messages that arrived mid-turn are
 * handed to the model as ordinary user messages, appended after the step's messages. Since
 * AI SDK 7 a `messages` override carries forward (the next step gets it plus that step's
 * response), so each merge is added once, where it arrived, and every later request extends
 * the earlier one. With an `interrupt` (LANE_POLICY=interrupt) a message can also abort the
 * model call under way: the loop then makes a new `streamText` call that runs that step again
 * from the input it had, the arrivals appended (the steps that finished stay as they are).
 *
 * Not an async function: what follows the SDK's loop is chained to its promise, so no frame
 * of ours (generator, registers, await closures) is held through every model call of the turn.
 */
export function runLoop<T>(input: LoopInput<T>): Promise<LoopResult<T>> {
  const merges: MergePoint<T>[] = [];
  let merged = 0;
  // How many leading step messages are the turn's input (the history it started with): a
  // rebase replaces exactly those, keeping this turn's responses and merges after them.
  let headLength = input.messages.length;

  // The SDK's abort signal is the turn's, which a step running past stepTimeoutMs aborts too.
  // Every check below reads whether the turn was *ended* (lost or stopped): a timed-out step is
  // thrown by the SDK as the model's error, never mistaken for a lost or stopped lane.
  const { abort, stepTimeoutMs, usage: tally, interrupt } = input;
  abort.beginLoop();

  // An interrupt restarts the loop with a new `streamText` call from the step it aborted: that
  // call's step 0 is the turn's step `base`; the responses of earlier calls' steps are kept for
  // the merge room, and the aborted step's own input is where the restart begins.
  let base = 0;
  let earlierResponses: readonly ModelMessage[] = [];
  let callResponses: readonly ModelMessage[] = [];
  let stepInput: ModelMessage[] = input.messages;
  const responsesSoFar = (call: readonly ModelMessage[]) =>
    earlierResponses.length === 0 ? call : [...earlierResponses, ...call];

  /** Arrivals for the step about to run, already in the model's form; nothing when none fit. */
  const takeArrivals = async (
    stepNumber: number,
    responses: readonly ModelMessage[],
    fresh: boolean,
  ): Promise<{ items: T[]; messages: ModelMessage[] }> => {
    try {
      const items = await input.nextArrivals(input.maxMerges - merged, responses, fresh);
      if (items.length === 0) return { items, messages: [] };
      const messages = await input.toModel(items);
      merges.push({ stepNumber, items });
      merged += items.length;
      return { items, messages };
    } catch (err) {
      // A failed read only delays those messages to the next turn; it must not fail this one.
      input.logger.warn({ err }, 'lane merge read failed');
      return { items: [], messages: [] };
    }
  };

  const prepareStep: PrepareStepFunction<ToolSet> = async ({
    stepNumber: callStep,
    messages,
    responseMessages,
  }) => {
    if (stepTimeoutMs) abort.armStep(stepTimeoutMs);
    callResponses = responseMessages;
    let arrived: ModelMessage[] | undefined;
    if (callStep > 0 && merged < input.maxMerges && !abort.ended) {
      const taken = await takeArrivals(base + callStep, responsesSoFar(responseMessages), false);
      if (taken.items.length > 0) {
        arrived = taken.messages;
        input.onMerge?.(taken.items);
      }
    }
    const rebase = input.control?.rebase;
    if (rebase && input.control) input.control.rebase = undefined;
    let prepared: { messages?: ModelMessage[] } = {};
    if (rebase) {
      // The turn's own messages so far (responses and merges) stay after the new head.
      const own = messages.slice(headLength);
      headLength = rebase.length;
      prepared = { messages: [...rebase, ...own, ...(arrived ?? [])] };
    } else if (arrived) prepared = { messages: [...messages, ...arrived] };
    stepInput = prepared.messages ?? messages;
    interrupt?.modelCallStarts();
    return prepared;
  };

  // The steps that finished, kept as they finish: a stopped turn commits those.
  const steps: StepResult<ToolSet>[] = [];
  // Calls the SDK answered before the first step (a resumed turn's approved or denied calls).
  const resumed: ResumedCall[] = [];
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
      merges,
      finalText: last?.text ?? '',
      steps: steps.length,
      models: steps.map((s) => s.response.modelId),
      usage: { inputTokens, outputTokens },
      ...(stopped && { stopped }),
      resumed,
    };
  };

  const settled = () => interrupt?.settled();
  // Approved and denied calls the SDK settles before a call's first step (generateText: no
  // parts to read them from). Reset per call: an interrupt's restart answers them again.
  let stepped = false;
  let callInput = 0;
  const call = (messages: ModelMessage[]): Promise<LoopResult<T>> => {
    stepped = false;
    callInput = messages.length;
    // One set of options for both paths: only how the result is read differs.
    const options = {
      model: input.model,
      instructions: input.system,
      messages,
      tools: input.tools,
      ...(input.activeTools && { activeTools: input.activeTools }),
      // Typed `object`: the SDK types `toolsContext` from the tools' declared context schemas,
      // which a `ToolSet` (ours merged with the operator's and the program's) does not carry.
      ...(input.toolsContext && ({ toolsContext: input.toolsContext } as object)),
      ...(input.providerOptions && { providerOptions: input.providerOptions }),
      stopWhen: isStepCount(input.maxSteps - base),
      prepareStep: (options: Parameters<PrepareStepFunction<ToolSet>>[0]) => {
        if (!stepped) {
          stepped = true;
          deniedBefore(options.messages.slice(callInput), resumed);
        }
        return prepareStep(options);
      },
      abortSignal: interrupt ? interrupt.signalFor(abort.signal) : abort.signal,
      // Awaited by the SDK before each tool's execute: from here on the step cannot be interrupted.
      ...(interrupt && { onToolExecutionStart: settled }),
      onToolExecutionEnd: (event: { toolOutput: unknown }) => {
        if (!stepped) resumedCall(event.toolOutput as TextStreamPart<ToolSet>, resumed);
      },
      onStepEnd: (step: unknown) => {
        const ended = step as StepResult<ToolSet>;
        steps.push(ended);
        interrupt?.settled();
        if (stepTimeoutMs) abort.disarmStep();
        // The model that served the step: a fallback may have answered for the configured one.
        tally?.add(callUsage(ended.response.modelId || ended.model.modelId, ended.usage));
      },
      maxRetries: input.maxRetries ?? 2,
      // Step results would otherwise keep every request body until the turn ends: at 2,000
      // turns in flight that was ~90 MB of RSS nobody reads. (Said here so a default change
      // cannot bring them back.)
      include: { requestBody: false },
      ...(input.download && { experimental_download: input.download }),
      ...(input.sandbox && { experimental_sandbox: input.sandbox }),
      ...(input.toolApproval && { toolApproval: input.toolApproval }),
      ...(input.toolApprovalSecret && { experimental_toolApprovalSecret: input.toolApprovalSecret }),
      // Tracing on: the SDK's spans of the call, each step and each tool call (gen_ai.*).
      ...modelTelemetry('chatlane.turn'),
    };
    // Streamed: errors arrive as the stream's error parts, read by `consume` (the default
    // onError would print them). Not streamed: generateText throws them.
    const finished: Promise<unknown> = input.onPart
      ? consume(streamText({ ...options, onError: () => undefined }).fullStream, input, resumed)
      : generateText(options).then(() => undefined);
    // An interrupted call (never an ended turn, nor a step that ran out of time) is restarted.
    const interrupted = () => interrupt?.raised === true && !abort.ended && !abort.timedOut;
    return finished.then(
      (failure) => {
        abort.disarmStep();
        if (abort.stoppedByRequest) return done(true);
        if (abort.ended) throw abort.ended;
        if (interrupted()) return restart();
        if (failure !== undefined) throw failure;
        // A step that ran out is aborted, not failed, in the stream: thrown as the SDK's TimeoutError.
        if (abort.timedOut) throw abort.signal.reason;
        return done(false);
      },
      (err: unknown) => {
        abort.disarmStep();
        if (abort.stoppedByRequest) return done(true);
        if (interrupted()) return restart();
        if (abort.ended) throw abort.ended;
        // generateText throws what aborted it: a step that ran out is the SDK's TimeoutError, as streamed.
        if (abort.timedOut && !input.onPart) throw abort.signal.reason;
        throw err;
      },
    );
  };

  /**
   * The aborted step again, from the input it was given plus what arrived (read now): a new
   * `streamText` call whose step 0 is that step. Its finished steps stay as they are.
   */
  const restart = async (): Promise<LoopResult<T>> => {
    earlierResponses = responsesSoFar(callResponses);
    callResponses = [];
    base = steps.length;
    let messages = stepInput;
    let items: T[] = [];
    if (merged < input.maxMerges) {
      const taken = await takeArrivals(base, earlierResponses, true);
      items = taken.items;
      if (items.length > 0) messages = [...stepInput, ...taken.messages];
    }
    input.onInterrupt?.(items, base);
    if (items.length > 0) input.onMerge?.(items);
    return call(messages);
  };

  return call(input.messages);
}

/** Read the model's stream to its end, handing each part on; resolves with its first error, if any. */
async function consume<T>(
  stream: AsyncIterable<TextStreamPart<ToolSet>>,
  input: Pick<LoopInput<T>, 'onPart' | 'logger'>,
  resumed: ResumedCall[],
): Promise<unknown> {
  let failure: unknown;
  let stepped = false;
  for await (const part of stream) {
    if (part.type === 'error') {
      failure ??= part.error;
      continue;
    }
    if (part.type === 'start-step') stepped = true;
    else if (!stepped) resumedCall(part, resumed);
    if (!input.onPart) continue;
    try {
      input.onPart(part);
    } catch (err) {
      // The live view must not fail the turn.
      input.logger.warn({ err }, 'stream part handler failed');
    }
  }
  return failure;
}

/**
 * Calls the SDK denied before a call's first step, as generateText hands them on: tool
 * results marked `execution-denied` in the messages it added to the input (streamText also
 * streams them as parts; each call is kept once).
 */
function deniedBefore(added: readonly ModelMessage[], out: ResumedCall[]): void {
  for (const message of added) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type !== 'tool-result' || part.output.type !== 'execution-denied') continue;
      if (out.some((r) => r.toolCallId === part.toolCallId)) continue;
      out.push({ toolCallId: part.toolCallId, kind: 'denied' });
    }
  }
}

/** A part the SDK streams before the first step: an approved call's result or error, a denial. */
function resumedCall(part: TextStreamPart<ToolSet>, out: ResumedCall[]): void {
  // An interrupt restarts the first step: the SDK answers the same calls again (the guard
  // gives the stored result); each call is kept once.
  if ('toolCallId' in part && out.some((r) => r.toolCallId === part.toolCallId)) return;
  if (part.type === 'tool-result' && !part.preliminary)
    out.push({ toolCallId: part.toolCallId, kind: 'result', output: part.output });
  else if (part.type === 'tool-error')
    out.push({
      toolCallId: part.toolCallId,
      kind: 'error',
      error: part.error instanceof Error ? part.error.message : String(part.error),
    });
  else if (part.type === 'tool-output-denied') out.push({ toolCallId: part.toolCallId, kind: 'denied' });
}
