import { createRequire } from 'node:module';
import collectDefaultMetrics from 'prom-client/lib/defaultMetrics.js';
import type Registry from 'prom-client/lib/registry.js';
import { collectEventLoopLag } from './event-loop-lag.js';

const require = createRequire(import.meta.url);

/** prom-client's collector modules take the registry and its default-metrics configuration. */
type Collector = (registry: Registry, config: object) => void;

/**
 * prom-client's default `process_*`/`nodejs_*` metrics, each from prom-client's own collector,
 * except the event-loop delay: ./event-loop-lag.ts serves those same metrics from a sampler that
 * wakes an idle process once a second instead of ten times. prom-client's own list drives the
 * loop, so a metric a later version adds is collected too.
 */
export function collectDefaults(registry: Registry): void {
  for (const name of collectDefaultMetrics.metricsList) {
    if (name === 'eventLoopLag') continue;
    const collector: unknown = require(`prom-client/lib/metrics/${name}.js`);
    if (typeof collector !== 'function')
      throw new Error(`prom-client/lib/metrics/${name}.js is not a collector`);
    (collector as Collector)(registry, {});
  }
  collectEventLoopLag(registry);
}
