import { collectDefaultMetrics, Registry as PromRegistry } from 'prom-client';
import Registry from 'prom-client/lib/registry.js';
import { describe, expect, it, vi } from 'vitest';
import {
  collectEventLoopLag,
  EventLoopLagSampler,
  LAG_SAMPLING,
  type LoopClock,
} from '../../src/shared/event-loop-lag.js';
import { createMetrics } from '../../src/shared/metrics.js';
import { sampleValue } from '../helpers/prom.js';

/** A loop whose clock and utilization the test moves: `run(ms, share)` spends ms, share of it active. */
function fakeLoop() {
  let now = 0;
  const time = { idle: 0, active: 0 };
  const clock: LoopClock = { now: () => now, utilization: () => ({ ...time }) };
  return {
    clock,
    run(ms: number, activeShare: number) {
      now += ms;
      time.active += ms * activeShare;
      time.idle += ms * (1 - activeShare);
    },
  };
}

/** A sampler on the fake loop, its window opened at 0 and no timer of its own: the test ticks it. */
function manualSampler() {
  const loop = fakeLoop();
  const sampler = new EventLoopLagSampler(LAG_SAMPLING, loop.clock);
  sampler.start();
  sampler.stop();
  /** `ms` of loop time at `activeShare`, then the sample due then. */
  const step = (ms: number, activeShare: number) => {
    loop.run(ms, activeShare);
    sampler.tick();
    return sampler.intervalMs;
  };
  return { sampler, step };
}

describe('EventLoopLagSampler', () => {
  it('samples every 100 ms while the loop works and once a second after a whole idle second', () => {
    const { sampler, step } = manualSampler();
    expect(sampler.intervalMs).toBe(100);
    // 900 ms of an idle loop (0.5 % active): not a whole second yet.
    for (let i = 0; i < 9; i++) expect(step(100, 0.005)).toBe(100);
    expect(step(100, 0.005)).toBe(1000);
    expect(step(1000, 0.002)).toBe(1000);
    // A second with 2 % of work in it: fast again.
    expect(step(1000, 0.02)).toBe(100);
  });

  it('keeps the fast rate while any window of the last second had work in it', () => {
    const { step } = manualSampler();
    for (let i = 0; i < 20; i++) expect(step(100, 0.3)).toBe(100);
    // Idle from here: the window restarts at the last busy sample, so a second of idle is needed.
    for (let i = 0; i < 9; i++) expect(step(100, 0)).toBe(100);
    expect(step(100, 0)).toBe(1000);
  });

  it('counts the loop as working from 1 % utilization over the window', () => {
    const below = manualSampler();
    for (let i = 0; i < 10; i++) below.step(100, 0.0099);
    expect(below.sampler.intervalMs).toBe(1000);
    const at = manualSampler();
    for (let i = 0; i < 10; i++) at.step(100, 0.01);
    expect(at.sampler.intervalMs).toBe(100);
  });

  it('records how late each sample fires, in nanoseconds: a blocked loop shows as a long delay', async () => {
    const sampler = new EventLoopLagSampler();
    sampler.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // Block the loop: the sample due within 100 ms fires at least 200 ms late.
      }
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(sampler.histogram.count).toBeGreaterThan(0);
      expect(sampler.histogram.max).toBeGreaterThanOrEqual(200e6);
    } finally {
      sampler.stop();
    }
  });
});

/** The eight gauges on a registry of their own, fed by a sampler whose histogram the test fills. */
function lagRegistry() {
  const registry = new Registry();
  const { sampler } = manualSampler();
  collectEventLoopLag(registry, sampler);
  sampler.stop();
  return { registry, histogram: sampler.histogram };
}

describe('collectEventLoopLag', () => {
  it("serves prom-client's eight event-loop delay metrics from the samples since the last scrape", async () => {
    const { registry, histogram } = lagRegistry();
    histogram.record(5e6);
    histogram.record(15e6);
    let text = await registry.metrics();
    expect(sampleValue(text, 'nodejs_eventloop_lag_min_seconds')).toBeCloseTo(0.005, 3);
    expect(sampleValue(text, 'nodejs_eventloop_lag_max_seconds')).toBeCloseTo(0.015, 3);
    expect(sampleValue(text, 'nodejs_eventloop_lag_mean_seconds')).toBeCloseTo(0.01, 3);
    expect(sampleValue(text, 'nodejs_eventloop_lag_p99_seconds')).toBeCloseTo(0.015, 3);
    for (const name of ['stddev', 'p50', 'p90']) {
      expect(sampleValue(text, `nodejs_eventloop_lag_${name}_seconds`)).toBeGreaterThan(0);
    }
    // The scrape reset the samples; the next scrape reads only what came after it.
    await new Promise((resolve) => setImmediate(resolve));
    histogram.record(1e6);
    text = await registry.metrics();
    expect(sampleValue(text, 'nodejs_eventloop_lag_max_seconds')).toBeCloseTo(0.001, 4);
    // The time to the next turn of the loop, measured by the previous scrape.
    expect(sampleValue(text, 'nodejs_eventloop_lag_seconds')).toBeGreaterThan(0);
  });

  it('keeps the last values when a scrape finds no sample since the one before (an idle loop samples once a second)', async () => {
    const { registry, histogram } = lagRegistry();
    histogram.record(7e6);
    await registry.metrics();
    const text = await registry.metrics();
    expect(sampleValue(text, 'nodejs_eventloop_lag_max_seconds')).toBeCloseTo(0.007, 4);
    expect(sampleValue(text, 'nodejs_eventloop_lag_min_seconds')).toBeCloseTo(0.007, 4);
  });
});

describe('default metrics', () => {
  it("serve every metric prom-client's collectDefaultMetrics does, without its fixed-rate event-loop timer", async () => {
    const perfHooks = (await import('node:perf_hooks')).default;
    const prom = new PromRegistry();
    collectDefaultMetrics({ register: prom });
    const expected = (await prom.getMetricsAsJSON()).map((m) => m.name).sort();
    const monitor = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    try {
      // Collected once per process and appended to every instance's scrape.
      const metrics = createMetrics();
      const defaults = metrics.processRegistry;
      if (!defaults) throw new Error('no default metrics');
      const names = (await defaults.getMetricsAsJSON()).map((m) => m.name);
      expect(names.filter((n) => n.startsWith('nodejs_') || n.startsWith('process_')).sort()).toEqual(
        expected,
      );
      expect(monitor).not.toHaveBeenCalled();
    } finally {
      monitor.mockRestore();
    }
  });
});
