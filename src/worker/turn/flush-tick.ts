/**
 * One timer for every reply writer of a process. A writer with chunks waiting joins the next
 * tick instead of starting a timer of its own, so the writes that are due go out in the same
 * event-loop turn, and ioredis's auto-pipelining sends them in one socket write (one write and
 * one read for the whole tick, instead of one each per reply). With 50 replies streaming on a
 * worker, that was most of the system calls a reply cost.
 *
 * A chunk waits at most `ms` (less when it joins a tick already counting down), as it did with
 * a timer per writer.
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

  /** `flush` no longer runs at the next tick. */
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
    // A flush that throws must not keep the others from writing.
    for (const flush of due) {
      try {
        flush();
      } catch {
        // The writer logs its own failures: a flush only starts a write.
      }
    }
  };
}
