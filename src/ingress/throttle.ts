const MAX_TRACKED = 100_000;

/**
 * "At most one write per key per interval" for best-effort indexes written beside the
 * ingest. Only successful writes are recorded (`done`), so a failed one is retried by the
 * next message. Bounded memory: past MAX_TRACKED keys it forgets everything, which only
 * costs one extra write per key.
 */
export class WriteThrottle {
  private readonly written = new Map<string, number>();

  constructor(private readonly intervalMs: number) {}

  due(key: string, now: number): boolean {
    const last = this.written.get(key);
    return last === undefined || now - last >= this.intervalMs;
  }

  done(key: string, now: number): void {
    if (this.written.size >= MAX_TRACKED) this.written.clear();
    this.written.set(key, now);
  }
}
