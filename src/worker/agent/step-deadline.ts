/**
 * LLM_TIMEOUT_MS for each step of the tool loop, in place of the AI SDK's `timeout: { stepMs }`.
 * The SDK's option builds, for every turn, a step controller and a second controller merging
 * it with the turn's signal (a listener on each): two AbortSignals with their listener maps
 * held for the whole turn. This is one controller per turn, aborted by the turn's signal or
 * by the step's timer, with the SDK's semantics: the timer runs from the start of a step
 * (prepareStep) until the step has finished (onStepFinish: its tool calls included), and
 * aborts with the same `TimeoutError` DOMException, which failure.ts classifies as the
 * model's. The turn's signal itself is never aborted by a timeout: a slow model is not a
 * lost or stopped lane.
 */
export class StepDeadline {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly turn: AbortSignal,
    private readonly ms: number,
  ) {
    if (turn.aborted) this.controller.abort(turn.reason);
    // The deadline is its own listener (handleEvent): no closure per turn.
    else turn.addEventListener('abort', this, { once: true });
  }

  /** What the SDK is handed: aborted when the turn's signal is, or when a step runs out. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** A step starts. */
  arm(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(expire, this.ms, this);
  }

  /** A step has finished. */
  disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The loop is over: no timer left behind, no listener on the turn's signal. */
  dispose(): void {
    this.disarm();
    this.turn.removeEventListener('abort', this);
  }

  /** The turn's signal aborted (lost or stopped): so does the call, with the turn's reason. */
  handleEvent(): void {
    this.controller.abort(this.turn.reason);
  }

  /** The SDK's own message and name (setAbortTimeout in ai/dist). */
  timeOut(): void {
    this.timer = undefined;
    this.controller.abort(new DOMException(`Step timeout of ${this.ms}ms exceeded`, 'TimeoutError'));
  }
}

function expire(deadline: StepDeadline): void {
  deadline.timeOut();
}
