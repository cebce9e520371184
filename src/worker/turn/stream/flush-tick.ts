/**
 * One timer for every reply writer of a process. A writer with chunks waiting joins the next
 * tick instead of starting a timer of its own, so the writes that are due start in the same
 * task: their appends go in one script call (reply-appends.ts), and what else they send shares
 * ioredis's auto-pipelined socket write.
 *
 * A chunk waits at most `ms` (less when it joins a tick already counting down), as it did with
 * a timer per writer. A flush must not throw: it only starts a write.
 */
export class FlushTick {
  private readonly due = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly ms: number) {}

  /** `flush` runs at the next tick (once, however often it is added before then). */
  add(flush: () => void): void {
    this.due.add(flush);
    this.timer ??= setTimeout(this.fire, this.ms);
  }

  /** Whether `flush` waits for the next tick. */
  has(flush: () => void): boolean {
    return this.due.has(flush);
  }

  /** `flush` no longer runs at the next tick (nothing when it was not waiting). */
  delete(flush: () => void): void {
    this.due.delete(flush);
    if (this.due.size === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    const due = [...this.due];
    this.due.clear();
    for (const flush of due) flush();
  };
}
