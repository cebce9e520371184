/**
 * LANE_POLICY=interrupt (docs/lane-policies.md): a new message aborts the model call of the
 * step under way, and the tool loop runs that step again with the message folded in.
 *
 * Only the model call can be interrupted. The AI SDK runs a step's tools once its model call
 * has ended (`onToolExecutionStart` is awaited before each `execute`), so from the first tool
 * start on, what the step does is done: a message then waits for the step's end and is merged
 * there, as with `merge`. What an aborted call had generated (text, a chat_send's input still
 * being written) was never sent and is dropped. JavaScript runs one callback at a time: a raise
 * that finds no tool started aborts before any can start.
 *
 * One per turn; each `streamText` call of the loop takes its signal from `signalFor`.
 */
export class StepInterrupt {
  private controller: AbortController | undefined;
  /** The step's model call is under way (prepareStep returned; no tool started, the step not ended). */
  private calling = false;
  private raisedHere = false;
  /** Model calls this turn had aborted so far. */
  private aborted = 0;

  /** How many model calls were aborted so far in this turn. */
  get count(): number {
    return this.aborted;
  }

  /** The current `streamText` call was aborted by a raise (it is then restarted, not failed). */
  get raised(): boolean {
    return this.raisedHere;
  }

  /** The signal of one `streamText` call: the turn's own, or this interrupt. */
  signalFor(turn: AbortSignal): AbortSignal {
    this.controller = new AbortController();
    this.raisedHere = false;
    this.calling = false;
    return AbortSignal.any([turn, this.controller.signal]);
  }

  /** The step's request is about to go out (the end of prepareStep). */
  modelCallStarts(): void {
    this.calling = true;
  }

  /** A tool of the step starts, or the step has ended: nothing of it can be taken back any more. */
  settled(): void {
    this.calling = false;
  }

  /** Abort the model call under way, if one is; true when it did. */
  raise(): boolean {
    if (!this.calling || !this.controller || this.raisedHere) return false;
    this.calling = false;
    this.raisedHere = true;
    this.aborted += 1;
    this.controller.abort(new StepInterruptedError());
    return true;
  }
}

/** Why a step's model call was aborted: a new message came (never a failure of the turn). */
export class StepInterruptedError extends Error {
  override name = 'StepInterruptedError';
  constructor() {
    super('model call interrupted by a new message');
  }
}
