/**
 * The one AbortController a turn holds for its whole life: the signal the AI SDK is handed
 * (and with it every tool's abortSignal). It aborts when the turn is ended by its lane (lost
 * or stopped: Lane extends this class), or when a step of the tool loop runs past
 * LLM_TIMEOUT_MS, in place of the SDK's `timeout: { stepMs }`. The SDK's option built two
 * more controllers per turn, and the step timer's own controller following the lane's
 * through a listener still held, at 2,000 parked turns, a second AbortController with its
 * listener map and Listener records per turn for the whole turn.
 *
 * The step timer has the SDK's semantics: it runs from the start of a step (prepareStep)
 * until the step has finished (onStepEnd: its tool calls included), and aborts with the
 * same `TimeoutError` DOMException, which failure.ts classifies as the model's. A timeout is
 * recorded apart from an end (`endedWith` stays unset): a slow model is not a lost or stopped
 * lane, the lease is still ours and the turn's failure is settled with the fence.
 */
export class TurnAbort {
  private controller = new AbortController();
  private stepTimer: NodeJS.Timeout | undefined;
  /** The step timer aborted the signal (and nothing had ended the turn before). */
  private timedOutHere = false;
  /** Why the turn was ended (its lane lost or stopped), once it was; a timeout is not that. */
  private endedWith: Error | undefined;
  /** Ended by a stop request: the turn commits what it did (see `stoppedByRequest`). */
  private keepWork = false;

  /** What the SDK is handed: aborted when the turn is ended or when a step runs out. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The reason the turn was ended (lost or stopped), whether or not a step timed out first. */
  get ended(): Error | undefined {
    return this.endedWith;
  }

  /**
   * A person or an operator asked the turn to stop (POST /v1/ui/:id/stop): the model call is
   * aborted, and the turn commits the steps that had finished, under its fence.
   */
  get stoppedByRequest(): boolean {
    return this.keepWork;
  }

  /** The signal was aborted by a step's timeout, not by the turn's end. */
  get timedOut(): boolean {
    return this.timedOutHere;
  }

  /**
   * End the turn: the model call and its tools are aborted with `reason` (unless a step's
   * timeout aborted them already). The first end wins: false when the turn had ended before.
   */
  protected end(reason: Error, keepWork = false): boolean {
    if (this.endedWith) return false;
    this.endedWith = reason;
    this.keepWork = keepWork;
    this.disarmStep();
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    return true;
  }

  /**
   * A tool loop starts (the turn's first, or its retry after a context overflow): an earlier
   * loop's step timeout does not carry over, the new loop gets a signal that is not aborted.
   * (Only after a timeout is the controller replaced: an ended turn stays aborted.)
   */
  beginLoop(): void {
    if (!this.timedOutHere || this.endedWith) return;
    this.controller = new AbortController();
    this.timedOutHere = false;
  }

  /** A step starts: after `ms` the signal aborts with the SDK's TimeoutError. */
  armStep(ms: number): void {
    clearTimeout(this.stepTimer);
    this.stepTimer = setTimeout(expire, ms, this, ms);
  }

  /** A step has finished, or the loop is over: no timer left behind. */
  disarmStep(): void {
    clearTimeout(this.stepTimer);
    this.stepTimer = undefined;
  }

  /** The SDK's own message and name (setAbortTimeout in ai/dist). */
  timeOutStep(ms: number): void {
    this.stepTimer = undefined;
    if (this.controller.signal.aborted) return;
    this.timedOutHere = true;
    this.controller.abort(new DOMException(`Step timeout of ${ms}ms exceeded`, 'TimeoutError'));
  }
}

function expire(turn: TurnAbort, ms: number): void {
  turn.timeOutStep(ms);
}
