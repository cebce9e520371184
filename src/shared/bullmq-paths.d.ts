// The modules ./bullmq.ts loads, typed as the package index types them (BullMQ ships their
// declarations for the index only).
declare module 'bullmq/dist/cjs/classes/errors/index.js' {
  export { DelayedError, UnrecoverableError } from 'bullmq';
}
declare module 'bullmq/dist/cjs/classes/queue.js' {
  export { Queue } from 'bullmq';
}
declare module 'bullmq/dist/cjs/classes/worker.js' {
  export { Worker } from 'bullmq';
}
declare module 'bullmq/dist/cjs/enums/index.js' {
  export { MetricsTime } from 'bullmq';
}
