import { createHistogram, performance, type RecordableHistogram } from 'node:perf_hooks';
import Gauge from 'prom-client/lib/gauge.js';
import type Registry from 'prom-client/lib/registry.js';

/**
 * prom-client's `nodejs_eventloop_lag_*` metrics (same names, help and aggregators, so its
 * dashboards keep working) from a sampler that wakes the process less when it has nothing to do.
 *
 * prom-client samples with `monitorEventLoopDelay` at a fixed rate. At 100 ms that timer was
 * most of an idle worker's wake-ups (10 of ~13 a second) and ~1.3 ms/s of its ~4.4 ms/s of idle
 * CPU (/proc, 40 s, three runs each way). This sampler measures the same thing — how late a
 * timer fires — every `busyMs` while the loop works, and every `idleMs` once the loop has been
 * idle (utilization below `busyUtilization`) for a whole `idleMs` window. A stall of `idleMs` or
 * longer is always seen; a shorter one in an idle loop is seen with probability length ÷
 * `idleMs`, and it makes that window busy, so the sampling after it is fast again. The stalls
 * that matter to chatlane (a lease's renewal margin is seconds: docs/design.md §9) are seen in
 * either mode.
 */

export interface LagSampling {
  /** Pause between samples while the loop works (prom-client's `eventLoopMonitoringPrecision`). */
  busyMs: number;
  /** Pause between samples once a whole window of this length was idle. */
  idleMs: number;
  /** Event-loop utilization (0–1) over a window from which the loop counts as working. */
  busyUtilization: number;
}

export const LAG_SAMPLING: LagSampling = { busyMs: 100, idleMs: 1000, busyUtilization: 0.01 };

/** The loop's cumulative idle and active time, ms (`performance.eventLoopUtilization()`). */
export interface LoopTime {
  idle: number;
  active: number;
}

/** What the sampler reads of the process: injectable, so the mode switch is tested without timing. */
export interface LoopClock {
  now(): number;
  utilization(): LoopTime;
}

const processClock: LoopClock = {
  now: () => performance.now(),
  utilization: () => performance.eventLoopUtilization(),
};

export class EventLoopLagSampler {
  readonly histogram: RecordableHistogram = createHistogram();
  private timer: NodeJS.Timeout | undefined;
  private interval: number;
  private dueAt = 0;
  /** The window the mode is decided on: when it began and the utilization counters then. */
  private windowStart = 0;
  private windowElu: LoopTime = { idle: 0, active: 0 };

  constructor(
    readonly sampling: LagSampling = LAG_SAMPLING,
    private readonly clock: LoopClock = processClock,
  ) {
    this.interval = sampling.busyMs;
  }

  /** The pause before the next sample, ms. */
  get intervalMs(): number {
    return this.interval;
  }

  start(): void {
    if (this.timer) return;
    this.interval = this.sampling.busyMs;
    this.openWindow(this.clock.now());
    this.schedule(this.clock.now());
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One sample: how late this tick is, then the mode for the next pause. Called by the timer. */
  tick(): void {
    const now = this.clock.now();
    // `record` takes integers ≥ 1; nanoseconds, as monitorEventLoopDelay records them.
    this.histogram.record(Math.max(1, Math.round((now - this.dueAt) * 1e6)));
    this.decide(now);
    if (this.timer) this.schedule(now);
  }

  private decide(now: number): void {
    const { busyMs, idleMs, busyUtilization } = this.sampling;
    const current = this.clock.utilization();
    const active = current.active - this.windowElu.active;
    const idle = current.idle - this.windowElu.idle;
    const busy = active + idle > 0 && active / (active + idle) >= busyUtilization;
    if (this.interval === idleMs) {
      // Each idle-mode pause is a window of its own: any work in it brings the fast rate back.
      if (busy) this.interval = busyMs;
    } else if (!busy) {
      // Fast mode slows down only after a whole idle window since the last busy sample.
      if (now - this.windowStart < idleMs) return;
      this.interval = idleMs;
    }
    this.openWindow(now, current);
  }

  private openWindow(now: number, elu: LoopTime = this.clock.utilization()): void {
    this.windowStart = now;
    this.windowElu = elu;
  }

  private schedule(now: number): void {
    this.dueAt = now + this.interval;
    this.timer = setTimeout(() => this.tick(), this.interval);
    this.timer.unref();
  }
}

/** The seven statistics prom-client reports of its histogram: name, help, aggregator, reading. */
const STATISTICS: Array<[string, string, 'min' | 'max' | 'average', (h: RecordableHistogram) => number]> = [
  ['min', 'The minimum recorded event loop delay.', 'min', (h) => h.min],
  ['max', 'The maximum recorded event loop delay.', 'max', (h) => h.max],
  ['mean', 'The mean of the recorded event loop delays.', 'average', (h) => h.mean],
  ['stddev', 'The standard deviation of the recorded event loop delays.', 'average', (h) => h.stddev],
  ['p50', 'The 50th percentile of the recorded event loop delays.', 'average', (h) => h.percentile(50)],
  ['p90', 'The 90th percentile of the recorded event loop delays.', 'average', (h) => h.percentile(90)],
  ['p99', 'The 99th percentile of the recorded event loop delays.', 'average', (h) => h.percentile(99)],
];

/**
 * The eight gauges of prom-client's eventLoopLag collector on `registry`, fed by `sampler`, which
 * this starts. Like prom-client, a scrape reads the samples since the last scrape and resets
 * them; a scrape that finds none keeps the last values (an idle loop samples once per `idleMs`).
 */
export function collectEventLoopLag(registry: Registry, sampler = new EventLoopLagSampler()): void {
  const registers = [registry];
  const { histogram } = sampler;
  // `lag` first: a scrape serializes in registration order, and its collect sets the others.
  const lag = new Gauge({
    name: 'nodejs_eventloop_lag_seconds',
    help: 'Lag of event loop in seconds.',
    registers,
    aggregator: 'average',
    collect() {
      // As prom-client: the time to the next turn of the loop, measured now.
      const start = process.hrtime.bigint();
      setImmediate(() => lag.set(Number(process.hrtime.bigint() - start) / 1e9));
      if (histogram.count === 0) return;
      for (const { gauge, read } of statistics) gauge.set(read(histogram) / 1e9);
      histogram.reset();
    },
  });
  const statistics = STATISTICS.map(([name, help, aggregator, read]) => ({
    gauge: new Gauge({ name: `nodejs_eventloop_lag_${name}_seconds`, help, registers, aggregator }),
    read,
  }));
  sampler.start();
}
