// The modules ./metrics.ts loads, typed as the package index types them (prom-client ships
// declarations for the index only). Each module's `module.exports` is the one value.
declare module 'prom-client/lib/counter.js' {
  export { Counter as default } from 'prom-client';
}
declare module 'prom-client/lib/defaultMetrics.js' {
  export { collectDefaultMetrics as default } from 'prom-client';
}
declare module 'prom-client/lib/gauge.js' {
  export { Gauge as default } from 'prom-client';
}
declare module 'prom-client/lib/histogram.js' {
  export { Histogram as default } from 'prom-client';
}
declare module 'prom-client/lib/registry.js' {
  export { Registry as default } from 'prom-client';
}
